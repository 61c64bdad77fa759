// Reads a JSON array of {secrets, body, signature} on stdin and prints, for each case, what
// @octokit/webhooks-methods says: verdict (true, false or "error" when it throws) from
// verifyWithFallback(secrets[0], body, signature, secrets.slice(1)), and the signature its
// sign(secrets[0], body) makes (null when it throws).
import { sign, verifyWithFallback } from "@octokit/webhooks-methods";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const answers = [];
for (const { secrets, body, signature } of JSON.parse(input)) {
  let verdict;
  try {
    verdict = await verifyWithFallback(secrets[0], body, signature, secrets.slice(1));
  } catch {
    verdict = "error";
  }
  let signed = null;
  try {
    signed = await sign(secrets[0], body);
  } catch {
    signed = null;
  }
  answers.push({ verdict, signed });
}
process.stdout.write(JSON.stringify(answers));
