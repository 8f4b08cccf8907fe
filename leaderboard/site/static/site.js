"use strict";
// Draws the figures embedded in a page with the vendored Plotly and runs the tree inspector. Text
// from a run (sources, prompts, responses) is untrusted: it is only ever set as textContent.

const root = document.body.dataset.root;

function embedded(id) {
  return JSON.parse(document.getElementById(id).textContent);
}

function draw(div) {
  const figure = embedded(div.dataset.figure);
  return Plotly.newPlot(div, figure.data, figure.layout, { displaylogo: false, responsive: true }).then((plot) => {
    if (div.hasAttribute("data-links")) {
      // Points of these figures carry the page they stand for, relative to the site's root.
      plot.on("plotly_click", (event) => {
        const target = event.points.map((p) => p.customdata).find((c) => typeof c === "string");
        if (target) window.location.href = root + target;
      });
    }
    return plot;
  });
}

function element(tag, text, className) {
  const made = document.createElement(tag);
  made.textContent = text;
  if (className) made.className = className;
  return made;
}

function fill(id, text, empty) {
  const target = document.getElementById(id);
  target.textContent = text || empty;
  target.classList.toggle("empty", !text);
}

function showDiff(diff) {
  // null: no parent source to compare with; "": the same source as the parent's.
  if (!diff) {
    fill("node-diff", "", diff === null ? "(no parent source to compare with)" : "(identical to its parent)");
    return;
  }
  const target = document.getElementById("node-diff");
  target.replaceChildren();
  target.classList.remove("empty");
  for (const line of diff.split("\n")) {
    const kind = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    target.append(element("span", line + "\n", kind));
  }
}

function showFacts(node) {
  const response = node.response || {};
  const facts = {
    action: node.action,
    parent: node.parent_id === null ? "none (a root)" : `node ${node.parent_id}`,
    "cost (USD)": node.cost_usd.toPrecision(3),
    tokens: `${node.tokens_in} in, ${node.tokens_out} out`,
    "wall time (s)": node.wall_s.toFixed(2),
    "answered by": response.model || "—",
  };
  const list = document.getElementById("node-cost");
  list.replaceChildren();
  for (const [key, value] of Object.entries(facts)) list.append(element("dt", key), element("dd", String(value)));
}

function showPrompt(messages) {
  const target = document.getElementById("node-prompt");
  target.replaceChildren();
  if (!messages.length) target.append(element("p", "(no transcript recorded)", "empty"));
  for (const message of messages) target.append(element("h4", message.role), element("pre", message.content));
}

function showNode(node) {
  document.getElementById("node-panel").hidden = false;
  document.getElementById("node-title").textContent = `node ${node.id}: ${node.outcome}`;
  document.getElementById("node-summary").textContent = node.summary;
  showFacts(node);
  fill("node-source", node.source, "(the answer held no code)");
  showDiff(node.diff);
  fill("node-advice", node.advice, "(none)");
  fill("node-result", node.result ? JSON.stringify(node.result, null, 2) : "", "(not evaluated)");
  showPrompt(node.prompt);
  fill("node-response", node.response ? node.response.text : "", "(no response recorded)");
  for (const button of document.querySelectorAll("[data-node]")) {
    button.classList.toggle("selected", Number(button.dataset.node) === node.id);
  }
}

function inspect(plot) {
  const tree = embedded("tree-nodes");
  const nodes = new Map(tree.nodes.map((node) => [node.id, node]));
  plot.on("plotly_click", (event) => {
    const id = event.points.map((p) => p.customdata).find((c) => nodes.has(c));
    if (id !== undefined) showNode(nodes.get(id));
  });
  for (const button of document.querySelectorAll("[data-node]")) {
    button.addEventListener("click", () => showNode(nodes.get(Number(button.dataset.node))));
  }
  const first = nodes.get(tree.best) || tree.nodes[0];
  if (first) showNode(first);
}

for (const div of document.querySelectorAll("[data-figure]")) {
  const drawn = draw(div);
  if (div.dataset.figure === "tree-figure") drawn.then(inspect);
}
