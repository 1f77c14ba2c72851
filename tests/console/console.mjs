// console.mjs — drives the console of a running `verdict serve` in headless
// Chromium (playwright-core), for tests/console/console.sh:
//
//   node console.mjs URL SNAPSHOT_ID RULE OUT_DIR TOKEN
//
// URL: the server, started with --snapshot-reads admin; SNAPSHOT_ID and
// RULE: a decision the test made and the rule that decided it; OUT_DIR:
// where the screenshots go; TOKEN: the admin token, typed into the page
// half-way (before it, ids are hidden and the viewer is refused). Prints one line a
// check ("ok ..." or "FAIL ...") and a last "console.mjs: N passed, M failed".
// One browser for the whole run.
import { chromium } from "playwright-core";
import { existsSync } from "node:fs";

const [url, snapId, rule, out, token] = process.argv.slice(2);
if (!url || !snapId || !rule || !out || !token) {
  console.error("usage: node console.mjs URL SNAPSHOT_ID RULE OUT_DIR TOKEN");
  process.exit(2);
}
let passed = 0, failed = 0;
function check(cond, what, detail) {
  if (cond) { passed++; console.log("ok " + what); }
  else { failed++; console.log("FAIL " + what + (detail !== undefined ? ": " + detail : "")); }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Debian's /usr/bin/chromium is a shell wrapper; the browser itself is here.
const exe = process.env.CHROMIUM ||
  ["/usr/lib/chromium/chromium", "/usr/bin/chromium"].find((p) => existsSync(p));
const browser = await chromium.launch({
  executablePath: exe,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
let code = 1;
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  const errors = [], foreign = [], urls = [], bearer = [];
  page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
  // Chromium logs a 404 answer (the unknown id below) as a console error:
  // not a script error.
  page.on("console", (m) => {
    if (m.type() === "error" && !/^Failed to load resource/.test(m.text()))
      errors.push("console.error: " + m.text());
  });
  page.on("request", (r) => {
    if (!r.url().startsWith(url + "/")) foreign.push(r.url());
    urls.push(r.url());
    const h = r.headers();
    if (h.authorization === "Bearer " + token) bearer.push(r.url());
    if (h.cookie) errors.push("a request carried a cookie: " + r.url());
  });

  const resp = await page.goto(url + "/console", { waitUntil: "load" });
  check(resp && resp.status() === 200, "GET /console answers 200", resp && resp.status());
  await page.waitForFunction(() => document.getElementById("status").textContent === "live",
    null, { timeout: 15000 });
  check(true, "the page reads /v1/stats (status: live)");
  check(await page.evaluate(() => typeof window.uPlot === "function"), "uPlot loaded from the binary");

  const read = () => page.evaluate(() => ({
    total: Number(document.getElementById("total-decisions").textContent.replace(/,/g, "")),
    p99: document.getElementById("p99-now").textContent,
    at: document.getElementById("p-at").textContent,
    charts: document.querySelectorAll(".chart .uplot canvas").length,
  }));
  // wait for a second with decisions to be folded (the load runs meanwhile)
  await page.waitForFunction(() => Number(document.getElementById("total-decisions")
    .textContent.replace(/,/g, "")) > 0, null, { timeout: 15000 });
  const first = await read();
  check(first.charts >= 5, "five uPlot charts drawn", first.charts);
  check(/µs|ms/.test(first.p99), "a p99 is shown", first.p99);

  // The count grows with every folded second under load; the p99 of the
  // latest second changes as seconds go by (read until it does, at most 10).
  let second = first, moved = false;
  for (let i = 0; i < 10 && !(moved && second.total > first.total); i++) {
    await sleep(1000);
    second = await read();
    moved = moved || second.p99 !== first.p99;
  }
  check(second.total > first.total, "the decision count moves", first.total + " -> " + second.total);
  check(moved, "the p99 moves", first.p99 + " (" + first.at + ") -> " + second.p99 + " (" + second.at + ")");
  const rows = await page.locator("#strategies tbody tr").count();
  check(rows >= 2, "a row per strategy under load", rows);
  await page.screenshot({ path: out + "/console-live.png", fullPage: false });

  // without the token (--snapshot-reads admin): ids hidden, the viewer refused
  await page.waitForFunction(() => document.querySelectorAll("#recent-table tbody tr").length > 0,
    null, { timeout: 10000 });
  check(/snapshot ids hidden/.test(await page.textContent("#recent-note")),
    "without the token the recent ids are hidden", await page.textContent("#recent-note"));
  check(await page.locator("#recent-table tbody a").count() === 0, "and not linked");
  await page.fill("#snap-id", snapId);
  await page.click("#snap-show");
  await page.waitForFunction(() => document.getElementById("snap-error").textContent !== "",
    null, { timeout: 10000 });
  check(/^unauthorized/.test(await page.textContent("#snap-error")),
    "without the token the viewer is refused", await page.textContent("#snap-error"));
  await page.click("#rq-refresh");
  await page.waitForFunction(() => /unauthorized/.test(document.getElementById("rq-note").textContent),
    null, { timeout: 10000 }).then(() => check(true, "without the token the review queue is refused"),
    (e) => check(false, "without the token the review queue is refused", e.message));

  // the token typed in: sent as a header from then on
  await page.fill("#token", token);
  await page.waitForFunction(() => document.querySelectorAll("#recent-table tbody a").length > 0,
    null, { timeout: 10000 }).then(() => check(true, "with the token the recent ids are linked"),
    (e) => check(false, "with the token the recent ids are linked", e.message));

  // the review queue: a reviewer answers the oldest pending decision
  await page.waitForFunction(() => document.querySelectorAll("#rq-table tbody tr").length > 0,
    null, { timeout: 10000 }).then(() => check(true, "the review queue lists pending decisions"),
    (e) => check(false, "the review queue lists pending decisions", e.message));
  const pendingText = await page.textContent("#rq-count");
  check(/\d+ pending/.test(pendingText), "the queue says how many wait", pendingText);
  const row = page.locator("#rq-table tbody tr").first();
  const reviewedId = await row.getAttribute("data-id");
  await row.locator("input.rq-answer").fill("allow");
  await row.locator("input.rq-text").fill("checked by the console test");
  await row.locator("button.rq-record").click();
  await page.waitForFunction((id) => document.querySelector('#rq-done tbody tr[data-id="' + id + '"]') &&
    !document.querySelector('#rq-table tbody tr[data-id="' + id + '"]'), reviewedId, { timeout: 10000 })
    .then(() => check(true, "an answer recorded leaves the queue"),
      (e) => check(false, "an answer recorded leaves the queue", e.message));
  const rec = await fetch(url + "/v1/reviews?state=reviewed&limit=1000",
    { headers: { Authorization: "Bearer " + token } }).then((r) => r.json());
  const mine = (rec.reviews || []).filter((x) => x.snapshot_id === reviewedId);
  check(mine.length === 1 && mine[0].outcome.action === "allow" &&
    mine[0].outcome.note === "checked by the console test",
    "the server has the reviewer's answer", JSON.stringify(mine));
  await page.evaluate(() => document.getElementById("reviews").scrollIntoView());
  await page.screenshot({ path: out + "/console-reviews.png", fullPage: false });

  // recent decisions, filtered by strategy
  await page.selectOption("#f-strategy", "payment_fraud");
  await page.waitForFunction(() => {
    const cells = Array.from(document.querySelectorAll("#recent-table tbody tr td:nth-child(3)"));
    return cells.length > 0 && cells.every((c) => c.textContent === "payment_fraud");
  }, null, { timeout: 10000 }).then(() => check(true, "the strategy filter keeps payment_fraud only"),
    (e) => check(false, "the strategy filter keeps payment_fraud only", e.message));
  await page.selectOption("#f-review", "true");
  await page.waitForFunction(() => {
    const cells = Array.from(document.querySelectorAll("#recent-table tbody tr td:nth-child(7)"));
    return cells.length > 0 && cells.every((c) => c.textContent === "yes");
  }, null, { timeout: 10000 }).then(() => check(true, "the review filter keeps review-needed ones"),
    (e) => check(false, "the review filter keeps review-needed ones", e.message));

  // a decision clicked in the list opens in the viewer (the list paused,
  // so that the row stays put)
  await page.check("#f-pause");
  const link = page.locator("#recent-table tbody tr td:nth-child(2) a").first();
  const clickedId = await link.getAttribute("data-id");
  await link.click();
  await page.waitForFunction((id) => !document.getElementById("snap-view").hidden &&
    document.querySelector("#snap-meta dd") && document.querySelector("#snap-meta dd").textContent === id,
    clickedId, { timeout: 10000 }).then(() => check(true, "a clicked decision opens in the viewer"),
    (e) => check(false, "a clicked decision opens in the viewer", e.message));
  check((await page.textContent("#snap-source")) !== "", "the clicked one shows its source");

  // the test's own decision, typed in
  await page.uncheck("#f-pause");
  await page.selectOption("#f-strategy", "");
  await page.selectOption("#f-review", "");
  await page.fill("#snap-id", snapId);
  await page.click("#snap-show");
  await page.waitForFunction((id) => !document.getElementById("snap-view").hidden &&
    document.querySelector("#snap-meta dd").textContent === id, snapId, { timeout: 10000 });
  const shown = await page.textContent("#snap-rule");
  check(shown === rule, "a typed-in snapshot id shows its rule", shown);
  const matched = await page.textContent("#snap-trace tr.matched td:nth-child(2)").catch(() => null);
  check(matched === rule, "the rule trace marks the matching rule", matched);
  const lets = await page.locator("#snap-lets tbody tr").count();
  check(lets > 0, "its lets are laid out", lets);
  const stages = await page.locator("#snap-latency .stage").count();
  check(stages >= 3, "its latency by stage", stages);
  const raw = await page.getAttribute("#snap-raw", "href");
  check(raw === "/v1/snapshots/" + snapId, "a link to the raw JSON", raw);
  await page.locator("#snapshot").scrollIntoViewIfNeeded();
  await page.screenshot({ path: out + "/console-snapshot.png", fullPage: false });

  // an unknown id says so, and nothing breaks
  await page.fill("#snap-id", "01a00000-0000-7000-8000-000000000000");
  await page.click("#snap-show");
  await page.waitForFunction(() => document.getElementById("snap-error").textContent !== "",
    null, { timeout: 10000 });
  check(/snapshot_not_found/.test(await page.textContent("#snap-error")), "an unknown id is named as not found");

  // the whole page, for docs/console.md
  await page.fill("#snap-id", snapId);
  await page.click("#snap-show");
  await page.waitForFunction((id) => !document.getElementById("snap-view").hidden &&
    document.querySelector("#snap-meta dd").textContent === id, snapId, { timeout: 10000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: out + "/console.png", fullPage: true });

  check(bearer.some((u) => u.includes("/v1/snapshots/")) && bearer.some((u) => u.includes("/v1/reviews/")),
    "the token went in an Authorization header");
  check(!urls.some((u) => u.includes(token)), "the token never in a URL");
  const cookies = await page.context().cookies();
  check(cookies.length === 0 && (await page.evaluate(() => document.cookie)) === "",
    "no cookie set", JSON.stringify(cookies));
  check(await page.evaluate((t) => {
    for (const st of [localStorage, sessionStorage])
      for (let i = 0; i < st.length; i++) if (st.getItem(st.key(i)).includes(t)) return false;
    return true;
  }, token), "the token not in the browser's storage");
  check(errors.length === 0, "no script errors", errors.join(" | "));
  check(foreign.length === 0, "nothing fetched from elsewhere", foreign.join(" "));
  code = failed ? 1 : 0;
} catch (e) {
  failed++;
  console.log("FAIL the run stopped: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
console.log(`console.mjs: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : code);
