// Syntax highlighting with the grammars in languages.json (shared with Python).
const GRAMMARS = Object.fromEntries(
  Object.entries(LANGUAGES).map(([name, rules]) =>
    [name, rules.map(([cls, source]) => [cls, new RegExp(source, "y")])]));

function tokenize(line, language) {
  const rules = GRAMMARS[language] || [];
  const pieces = [];
  let plainStart = 0;
  let pos = 0;
  while (pos < line.length) {
    let matched = false;
    for (const [cls, regex] of rules) {
      regex.lastIndex = pos;
      const m = regex.exec(line);
      if (m && m[0].length > 0) {
        if (plainStart < pos) pieces.push(["", line.slice(plainStart, pos)]);
        const last = pieces[pieces.length - 1];
        if (last && last[0] === cls) last[1] += m[0];
        else pieces.push([cls, m[0]]);
        pos = plainStart = pos + m[0].length;
        matched = true;
        break;
      }
    }
    if (!matched) pos += 1;
  }
  if (plainStart < line.length) pieces.push(["", line.slice(plainStart)]);
  return pieces;
}

function highlightedLine(line, language) {
  const fragment = document.createDocumentFragment();
  for (const [cls, text] of tokenize(line, language)) {
    fragment.append(cls ? h("span", { class: "pl-tok-" + cls, text }) : document.createTextNode(text));
  }
  return fragment;
}
