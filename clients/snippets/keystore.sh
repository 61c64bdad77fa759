# Idempotency Key Store: run a shell command at most once per key, with curl alone.
#
#   source keystore.sh            # or paste the function into your script
#   export KEYSTORE_URL=https://keystore.example.com KEYSTORE_TOKEN=ks_...
#   keystore_once SCOPE KEY [PAYLOAD_JSON] -- COMMAND [ARGS...]
#
# The first call claims SCOPE/KEY, runs COMMAND and, on exit 0, completes with the exit code;
# a repeat prints a note on stderr and returns the stored exit code without running COMMAND.
# A non-zero exit releases the key (the next call runs COMMAND again) and is returned as is.
# The lease is renewed in the background while COMMAND runs; if the shell dies (even by
# kill -9), the renewals stop and the key goes to reconciliation when the lease runs out,
# never to a blind second run.
# Returns 75 when another run still holds the key after KEYSTORE_WAIT seconds (default and
# most 30: the key store waits, in one request),
# 76 when an earlier run ended with an unknown outcome (a person must resolve it), 77 when
# the key was used with a different payload, 78 when the token is refused, 69 when the key
# store cannot be reached or answers an error. (The keystore-client command does the same
# and also captures and replays the command's output: see docs/cli.md.)
# Guide: docs/platforms/shell.md

keystore_once() {
  local scope=$1 key=$2 payload='' lease=${KEYSTORE_LEASE_SECONDS:-60}
  shift 2 || { echo "usage: keystore_once SCOPE KEY [PAYLOAD_JSON] -- COMMAND..." >&2; return 64; }
  if [ "${1-}" != "--" ]; then payload=${1-}; shift; fi
  [ "${1-}" = "--" ] && shift
  [ $# -gt 0 ] || { echo "keystore_once: no command given (put it after --)" >&2; return 64; }
  local url=${KEYSTORE_URL:?keystore_once: set KEYSTORE_URL} auth
  auth="Authorization: Bearer ${KEYSTORE_TOKEN:?keystore_once: set KEYSTORE_TOKEN}"
  local wait=${KEYSTORE_WAIT:-30} ref body response status lease_token
  [[ $wait =~ ^[0123456789]{1,4}$ ]] \
    || { echo "keystore_once: KEYSTORE_WAIT is whole seconds, 0-30" >&2; return 64; }
  wait=$(( 10#$wait > 30 ? 30 : 10#$wait ))  # the key store waits at most 30 s for one claim
  # The lease token this claim proposes (lt_ + 32 base64url characters, 192 random bits): a
  # claim that got no answer is sent again with it and resumes what the lost one acquired.
  lease_token="lt_$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"

  # JSON strings: keys never contain control characters (the key store refuses them),
  # so escaping backslash and double quote is enough.
  _ks_json() { local s=${1//\\/\\\\}; printf '"%s"' "${s//\"/\\\"}"; }
  # POST or GET; sets `status` and `response` (the body). Fails when no answer came back.
  _ks_call() {
    local out
    out=$(curl -sS -m $(( 20 + wait )) -w '\n%{http_code}' -H "$auth" \
          -H 'Content-Type: application/json' "$@") || return 1
    status=${out##*$'\n'} response=${out%$'\n'*}
  }
  ref="\"scope\":$(_ks_json "$scope"),\"key\":$(_ks_json "$key")"
  body="{$ref,\"lease_seconds\":$lease,\"lease_token\":\"$lease_token\""
  if [ "$wait" -gt 0 ]; then body="$body,\"wait_seconds\":$wait"; fi
  body="$body${payload:+,\"payload\":$payload}}"

  # One request: while another run holds the key, the key store waits for it (up to $wait s)
  # and answers with its result. No answer at all: sent once more, with the same token.
  _ks_call -X POST "$url/v1/claim" --data-binary "$body" \
    || _ks_call -X POST "$url/v1/claim" --data-binary "$body" || return 69

  case $status in
    201) ;;
    200)
      local code
      code=$(printf '%s' "$response" | sed -n 's/.*"exit_code":\([0-9][0-9]*\).*/\1/p')
      echo "keystore_once: $scope/$key already ran (exit ${code:-0}); not running it again" >&2
      return "${code:-0}" ;;
    409) if [[ $response == *'"outcome":"in_progress"'* ]]; then
           echo "keystore_once: $scope/$key is in progress in another run" >&2; return 75
         fi
         echo "keystore_once: $scope/$key needs reconciliation by a person" >&2; return 76 ;;
    422) echo "keystore_once: $scope/$key was used with a different payload" >&2; return 77 ;;
    401|403) echo "keystore_once: the token was refused ($status)" >&2; return 78 ;;
    *) echo "keystore_once: the key store answered $status: $response" >&2; return 69 ;;
  esac

  ref="$ref,\"lease_token\":\"$lease_token\""  # the token it proposed is the lease's
  local shell_pid=${BASHPID:-$$}  # the shell running this function
  ( # heartbeat: extend the lease every lease/3 seconds while the command runs, and only while
    # this function's shell lives: if it is killed (kill -9 leaves no chance to stop us), the
    # renewals stop, so the lease runs out and the key goes to reconciliation
    while sleep $(( lease / 3 > 0 ? lease / 3 : 1 )); do
      kill -0 "$shell_pid" 2>/dev/null || exit 0
      curl -sS -m 20 -o /dev/null -H "$auth" -H 'Content-Type: application/json' \
        -X POST "$url/v1/extend" --data-binary "{$ref,\"lease_seconds\":$lease}" || true
    done
  ) >/dev/null 2>&1 &
  local heartbeat=$! rc=0
  "$@" || rc=$?
  kill "$heartbeat" 2>/dev/null || true; wait "$heartbeat" 2>/dev/null || true

  local n
  for n in 1 2 3 4; do  # the same complete or release again is safe: retry a lost answer
    if [ "$rc" -eq 0 ]; then
      _ks_call -X POST "$url/v1/complete" \
        --data-binary "{$ref,\"state\":\"succeeded\",\"result\":{\"body\":{\"exit_code\":0}}}"
    else
      _ks_call -X POST "$url/v1/release" --data-binary "{$ref,\"reason\":\"exit code $rc\"}"
    fi && break  # an answer came back
    sleep "$n"
  done
  [ "$status" = 200 ] && return "$rc"
  echo "keystore_once: could not record the outcome of $scope/$key (exit $rc): $status" >&2
  return 69
}
