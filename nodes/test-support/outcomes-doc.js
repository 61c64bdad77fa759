'use strict';
/**
 * docs/outcomes.md, read as data, for the packages' tests that check their mapping of the key
 * store's answers against it (so the page and the code cannot say different things):
 *
 *   const { endingOf, idiomOf, answers } = readOutcomesDoc();
 *   endingOf('in_progress')                  // 'Try later'
 *   idiomOf('Try later', 'Node-RED guard')   // ['error']: the code spans of that cell
 *
 * The two tables are found by their headings ("Which ending each answer gets", "Each
 * platform's idiom"); a table that cannot be read fails the test that reads it.
 */
const fs = require('node:fs');
const path = require('node:path');

const DOC = path.resolve(__dirname, '../../docs/outcomes.md');

/** The rows of the first table after `heading`: arrays of cell texts, header row first. */
function tableAfter(text, heading) {
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/outcomes.md has no section "${heading}"`);
  const lines = text.slice(start).split('\n').slice(2);
  const first = lines.findIndex((line) => line.startsWith('|'));
  const rows = [];
  for (const line of lines.slice(first)) {
    if (!line.startsWith('|')) break;
    rows.push(line.slice(1, -1).split(' | ').map((cell) => cell.trim()));
  }
  if (rows.length < 3) throw new Error(`the table under "${heading}" is empty`);
  return [rows[0], ...rows.slice(2)]; // without the |---| line
}

/** The `code spans` of a cell, in order. */
function codeSpans(cell) {
  return [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]);
}

function readOutcomesDoc() {
  const text = fs.readFileSync(DOC, 'utf8');
  const endings = new Map(); // answer code -> ending
  const [, ...answerRows] = tableAfter(text, 'Which ending each answer gets');
  for (const [answer, ending] of answerRows) {
    // the codes of a row are its cell's code spans before the first parenthesis ends them
    for (const code of codeSpans(answer.replace(/\([^)]*\)/g, ''))) endings.set(code, ending);
  }
  const [header, ...idiomRows] = tableAfter(text, "Each platform's idiom");
  const idioms = new Map(idiomRows.map((cells) => [cells[0], new Map(header.slice(1).map((name, i) => [name, cells[i + 1]]))]));
  return {
    answers: [...endings.keys()],
    endingOf(code) {
      if (!endings.has(code)) throw new Error(`docs/outcomes.md does not say which ending "${code}" gets`);
      return endings.get(code);
    },
    idiomOf(ending, platform) {
      const cell = idioms.get(ending)?.get(platform);
      if (cell === undefined) throw new Error(`docs/outcomes.md has no idiom of "${platform}" for "${ending}"`);
      return codeSpans(cell);
    },
  };
}

/**
 * The table of docs/outcomes.md "A send's answers": one row per answer of POST /v1/send,
 * as {codes (the answer cell's code spans outside parentheses), ending, cells: Map(column
 * -> cell text)}.
 */
function readSendTable() {
  const [header, ...rows] = tableAfter(fs.readFileSync(DOC, 'utf8'), "A send's answers");
  return rows.map((cells) => ({
    codes: codeSpans(cells[0].replace(/\([^)]*\)/g, '')),
    ending: cells[1],
    cells: new Map(header.map((name, i) => [name, cells[i]])),
  }));
}

module.exports = { readOutcomesDoc, readSendTable, codeSpans };
