// A real browser against the gateway: headless Chromium opens sse_page.html from an origin of
// its own (an HTTP server on another port), the page produces records with fetch() and tails
// the topic with EventSource, and this script checks that every record came back, in order
// within its partition, with `partition:offset` event ids. Prints one JSON line; exits 0 when
// every check passed, 1 when one failed, 2 on a timeout.
//
// Usage: node sse_roundtrip.js GATEWAY_URL TOKEN TOPIC
// playwright-core comes from tests/clients/package.json (NODE_PATH); the browser is Debian's
// chromium (CHROMIUM overrides /usr/bin/chromium). Nothing is downloaded.

"use strict";

const fs = require("fs");
const http = require("http");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const [gateway, token, topic] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const perBatch = 5;
const timeoutMs = Number(process.env.SKEIN_BROWSER_TIMEOUT_MS || "25000");

const report = {
  ok: false,
  problems: [],
  page: null,
  gateway,
  preflights: [],
  console: [],
  network: [],
};

function finish(code) {
  process.stdout.write(JSON.stringify(report) + "\n");
  process.exitCode = code;
}

// Object keys sorted, so values compare whatever order the gateway writes fields in.
function canonical(value) {
  if (Array.isArray(value)) {
    return value.map(canonical);
  }
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  }
  return value;
}

function same(a, b) {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

// Event ids are sealed: base64url("<topic>\n<partition>:<offset>,...") "." base64url(tag).
// The payload is readable (not secret), only not editable.
const EVENT_ID = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

function parseEventId(id) {
  const positions = new Map();
  const payload = Buffer.from(id.split(".")[0], "base64url").toString("utf8");
  const [idTopic, pairs] = payload.split("\n");
  if (idTopic !== topic) {
    return positions;
  }
  for (const part of pairs.split(",")) {
    const [p, o] = part.split(":").map(Number);
    positions.set(p, o);
  }
  return positions;
}

// The checks on what the page saw; answers the problems found.
function check(result) {
  const problems = [];
  const { produced, received } = result;
  if (produced.length !== 2 * perBatch) {
    problems.push(`produced ${produced.length} record(s), not ${2 * perBatch}`);
  }
  const seen = new Map();
  for (const r of received) {
    const at = `${r.partition}:${r.offset}`;
    if (seen.has(at)) {
      problems.push(`record ${at} arrived twice`);
    }
    seen.set(at, r);
    if (r.topic !== topic) {
      problems.push(`record ${at} names topic ${JSON.stringify(r.topic)}`);
    }
  }
  for (const p of produced) {
    const at = `${p.partition}:${p.offset}`;
    const r = seen.get(at);
    if (!r) {
      problems.push(`record ${at} (key ${p.key}) never arrived`);
      continue;
    }
    if (r.key !== p.key) {
      problems.push(`record ${at}: key ${JSON.stringify(r.key)}, produced ${JSON.stringify(p.key)}`);
    }
    if (!same(r.value, p.value)) {
      problems.push(`record ${at}: value ${JSON.stringify(r.value)}, produced ${JSON.stringify(p.value)}`);
    }
    const origin = (r.headers || []).find((h) => h.key === "origin");
    if (!origin || origin.value !== result.origin) {
      problems.push(`record ${at}: headers ${JSON.stringify(r.headers)} lack origin=${result.origin}`);
    }
  }
  if (received.length !== produced.length) {
    problems.push(`received ${received.length} record(s) for ${produced.length} produced`);
  }
  // In order within each partition, and each event id is the position after its record.
  const last = new Map();
  for (const r of received) {
    if (last.has(r.partition) && r.offset <= last.get(r.partition)) {
      problems.push(`partition ${r.partition}: offset ${r.offset} arrived after ${last.get(r.partition)}`);
    }
    last.set(r.partition, r.offset);
    if (!EVENT_ID.test(r.lastEventId || "")) {
      problems.push(`record ${r.partition}:${r.offset} has event id ${JSON.stringify(r.lastEventId)}`);
    } else if (parseEventId(r.lastEventId).get(r.partition) !== r.offset + 1) {
      problems.push(
        `record ${r.partition}:${r.offset} has event id ${r.lastEventId}, ` +
          `not partition ${r.partition} at ${r.offset + 1}`
      );
    }
  }
  const partitions = [...new Set(produced.map((p) => p.partition))].sort();
  if (partitions.length < 2) {
    problems.push(`records went to partitions ${partitions} only`);
  }
  // The last id holds the position of every partition with a record.
  if (EVENT_ID.test(result.lastEventId || "")) {
    const positions = parseEventId(result.lastEventId);
    for (const [partition, offset] of last) {
      if (positions.get(partition) !== offset + 1) {
        problems.push(`last event id ${result.lastEventId} lacks ${partition}:${offset + 1}`);
      }
    }
  } else {
    problems.push(`EventSource.lastEventId is ${JSON.stringify(result.lastEventId)}`);
  }
  return problems;
}

async function main() {
  if (!gateway || !token || !topic) {
    throw new Error("usage: node sse_roundtrip.js GATEWAY_URL TOKEN TOPIC");
  }
  const html = fs.readFileSync(path.join(__dirname, "sse_page.html"));
  const server = http.createServer((req, res) => {
    const url = req.url.split("?")[0];
    if (url === "/sse_page.html") {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      res.end(html);
    } else if (url === "/favicon.ico") {
      res.writeHead(204);
      res.end();
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  if (origin === new URL(gateway).origin) {
    throw new Error(`the page's origin ${origin} is the gateway's`);
  }

  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "skein-chromium-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      timeout: timeoutMs,
    });
    const page = context.pages()[0] || (await context.newPage());
    page.on("console", (m) => report.console.push(`${m.type()}: ${m.text()}`));
    page.on("pageerror", (e) => report.console.push(`pageerror: ${e.message}`));
    page.on("requestfailed", (r) =>
      report.network.push(`${r.method()} ${r.url().split("?")[0]} failed: ${r.failure()?.errorText}`)
    );
    // Preflights never reach Playwright's request events; the DevTools protocol shows them.
    const cdp = await context.newCDPSession(page);
    await cdp.send("Network.enable");
    const preflights = new Map();
    cdp.on("Network.requestWillBeSent", (e) => {
      if (e.initiator && e.initiator.type === "preflight") {
        const h = e.request.headers;
        const line =
          `${e.request.method} ${e.request.url.split("?")[0]} ` +
          `(for ${h["Access-Control-Request-Method"]} with ${h["Access-Control-Request-Headers"]})`;
        preflights.set(e.requestId, line);
        report.preflights.push(line);
      }
    });
    cdp.on("Network.loadingFailed", (e) => {
      const what = preflights.get(e.requestId);
      if (what === undefined) {
        return; // the others are in the requestfailed lines
      }
      const cors = e.corsErrorStatus ? ` CORS ${JSON.stringify(e.corsErrorStatus)}` : "";
      report.network.push(`${what} failed: ${e.errorText}${cors}`);
    });
    page.on("response", (r) => {
      if (r.url().startsWith(gateway)) {
        const allow = r.headers()["access-control-allow-origin"];
        report.network.push(
          `${r.request().method()} ${r.url().split("?")[0]} -> ${r.status()} ` +
            `(access-control-allow-origin: ${allow === undefined ? "absent" : allow})`
        );
      }
    });

    const query = new URLSearchParams({ gateway, token, topic, count: String(perBatch) });
    report.page = `${origin}/sse_page.html`;
    await page.goto(`${report.page}?${query}`, { timeout: timeoutMs });
    try {
      await page.waitForFunction(
        () => window.skeinResult !== undefined || window.skeinError !== undefined,
        null,
        { timeout: timeoutMs, polling: 100 }
      );
    } catch (e) {
      report.seen = await page.evaluate(() => window.skeinState && window.skeinState()).catch(() => null);
      throw e;
    }
    const error = await page.evaluate(() => window.skeinError);
    if (error) {
      report.problems.push(`the page failed: ${error.message}`);
      report.seen = error;
      finish(1);
      return;
    }
    const result = await page.evaluate(() => window.skeinResult);
    report.origin = result.origin;
    report.produced = result.produced.length;
    report.received = result.received.length;
    report.lastEventId = result.lastEventId;
    report.opened = result.opened;
    report.records = result.received.map((r) => ({
      partition: r.partition,
      offset: r.offset,
      key: r.key,
      value: r.value,
      id: r.lastEventId,
    }));
    report.problems = check(result);
    if (!report.preflights.some((p) => p.startsWith("OPTIONS ") && p.includes("/records"))) {
      report.problems.push("the browser sent no CORS preflight before producing");
    }
    if (report.problems.length > 0) {
      report.seen = result;
    }
    report.ok = report.problems.length === 0;
    finish(report.ok ? 0 : 1);
  } finally {
    if (context) {
      await context.close().catch(() => {});
    }
    server.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

const timer = setTimeout(() => {
  report.problems.push(`timed out after ${timeoutMs + 5000} ms`);
  finish(2);
  process.exit(2);
}, timeoutMs + 5000);

main()
  .catch((e) => {
    const timedOut = e && e.name === "TimeoutError";
    report.problems.push(`${timedOut ? "timed out" : "failed"}: ${e && e.stack ? e.stack : e}`);
    finish(timedOut ? 2 : 1);
  })
  .finally(() => clearTimeout(timer));
