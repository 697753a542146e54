/**
 * The demo page at GET / in real headless Chromium (Debian's, driven by playwright-core) against
 * a real server with the real engine: the page must show what the REST API itself answers for
 * the same file, whichever sample is committed. Writes out/web-page.png (git-ignored).
 */
import { mkdirSync, readFileSync } from "node:fs";
import sharp from "sharp";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { findChromium } from "../helpers/browser.js";
import { registerKey } from "../helpers/keys.js";
import { startKeyedServer, type KeyedTestServer } from "../helpers/server.js";

const root = new URL("../../", import.meta.url).pathname;
const SAMPLE = `${root}examples/sample-palm.jpg`;
const HAND = `${root}test/fixtures/palms/hand-0.jpg`;
const NO_HAND = `${root}test/fixtures/palms/negative-background.jpg`;
const BACK_OF_HAND = `${root}test/fixtures/palms/hand-back-0.jpg`;
const LINES = ["heart", "head", "life"] as const;
const browserPath = findChromium();
if (!browserPath.path) console.warn(`web-page.spec.ts: skipped: ${browserPath.why}`);

let analyzer: EngineAnalyzer;
let srv: KeyedTestServer;
let devKey: string;
let browser: Browser;

beforeAll(async () => {
  if (!browserPath.path) return;
  analyzer = await createTestAnalyzer();
  srv = await startKeyedServer({ analyzer, client: "dev", plan: "pro", showKeyOnPage: true });
  devKey = srv.key;
  browser = await chromium.launch({ executablePath: browserPath.path, args: ["--no-sandbox"] });
});
afterAll(async () => {
  await browser?.close();
  await srv?.close();
  await analyzer?.close();
});

/** restAnalyze is what any client gets from POST /v1/palm/analyze for `file`. */
async function restAnalyze(file: string): Promise<any> {
  const res = await fetch(`${srv.url}/v1/palm/analyze`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": devKey },
    body: JSON.stringify({ image: readFileSync(file).toString("base64") }),
  });
  expect(res.status).toBe(200);
  return res.json();
}

/**
 * expectPageShowsApiAnswer uploads `file` on the page and checks that it shows what the REST API
 * answers for the same file: the count of lines found, each line's stats, the overlay at the
 * photo's size, each mask painted pixel for pixel, the quota. Returns the count of lines found.
 */
async function expectPageShowsApiAnswer(page: Page, file: string, screenshot: string): Promise<number> {
  const expected = await restAnalyze(file);
  const expectedFound = LINES.filter((l) => expected.results.stats[l].detected).length;
  const { width, height } = await sharp(file)
    .rotate()
    .metadata()
    .then((m) => ({ width: m.width!, height: m.height! }));

  await uploadAndWait(page, file);
  expect(await page.getAttribute("body", "data-state")).toBe("done");
  expect(await page.textContent("#detected-count")).toBe(String(expectedFound));
  for (const line of LINES) {
    const s = expected.results.stats[line];
    const row = page.locator(`#stats tr[data-line="${line}"]`);
    expect(await row.locator(".detected").textContent()).toBe(s.detected ? "yes" : "no");
    expect(await row.locator(".pixels").textContent()).toBe(s.pixels.toLocaleString("en"));
    expect(await row.locator(".coverage").textContent()).toBe(`${s.coverage.toFixed(2)} %`);
  }
  // Each detected line's traits in the API's words; an undetected line's row says it has none.
  for (const line of LINES) {
    const t = expected.results.stats[line].traits;
    const row = page.locator(`#traits tr[data-line="${line}"]`);
    if (!t) {
      expect(await row.locator(".t-length").textContent()).toBe("not found: no traits");
      continue;
    }
    expect(await row.locator(".t-length").textContent()).toMatch(new RegExp(`^${t.length} \\(`));
    expect(await row.locator(".t-curvature").textContent()).toBe(`${t.curvature_label.replaceAll("_", " ")} (${t.curvature.toFixed(3)})`);
    expect(await row.locator(".t-depth").textContent()).toBe(`${t.depth_label} (${t.depth.toFixed(3)})`);
    expect(await row.locator(".t-breaks").textContent()).toEqual(t.breaks.length ? expect.stringMatching(/^at /) : "none");
    expect(await row.locator(".t-start").textContent()).toContain(t.start.zone === "wrist" ? "wrist" : t.start.zone.replace("_", " "));
  }
  const shape = expected.results.hand?.shape;
  expect(await page.textContent("#hand-shape")).toEqual(
    shape ? expect.stringContaining(`${shape.hand_type} hand, ${shape.palm} palm`) : "",
  );
  // The page says when the finger values are estimates (fingertips beyond the photo's edge).
  if (shape) expect((await page.textContent("#hand-shape"))?.includes("outside the photo")).toBe(!shape.fingers_in_photo);
  const hl = expected.results.head_life_start;
  expect(await page.textContent("#head-life")).toEqual(hl ? expect.stringContaining(hl.joined ? "joined" : "apart") : "");
  // The overlay is the API's JPEG, decoded by the browser at the photo's size; each mask canvas too.
  const overlay = await page.$eval("#overlay", (img: HTMLImageElement) => ({
    w: img.naturalWidth,
    h: img.naturalHeight,
    shown: img.getBoundingClientRect().width > 0,
    jpeg: img.src.startsWith("data:image/jpeg;base64,"),
  }));
  expect(overlay).toEqual({ w: width, h: height, shown: true, jpeg: true });
  for (const line of LINES) {
    // Painted mask pixels: as many as the API's mask has (the canvas is the PNG, recoloured).
    const canvas = await page.$eval(`canvas.mask[data-line="${line}"]`, (c: HTMLCanvasElement) => {
      const px = c.getContext("2d")!.getImageData(0, 0, c.width, c.height).data;
      let painted = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i] > 0) painted++;
      return { w: c.width, h: c.height, painted };
    });
    expect(canvas).toEqual({ w: width, h: height, painted: expected.results.stats[line].pixels });
  }
  expect(await page.textContent("#quota-text")).toMatch(/ of 10,000 analyses left this month on plan pro/);
  mkdirSync(`${root}out`, { recursive: true });
  await page.screenshot({ path: `${root}out/${screenshot}`, fullPage: true });
  return expectedFound;
}

async function openPage(): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1100, height: 1400 } });
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.goto(srv.url);
  await page.waitForSelector("body[data-ready='true']");
  expect(errors).toEqual([]);
  return page;
}

/** uploadAndWait chooses `file` (the page analyzes at once) and waits for the answer. */
async function uploadAndWait(page: Page, file: string): Promise<void> {
  await page.setInputFiles("#photo", file);
  await page.waitForSelector("body[data-state='done'], body[data-state='error']", { timeout: 60_000 });
}

describe.skipIf(!browserPath.path)(`demo page (GET /)${browserPath.path ? "" : ` [skipped: ${browserPath.why}]`}`, () => {
  it("shows the overlay, the masks and the per-line stats the REST API gives for examples/sample-palm.jpg", async () => {
    const page = await openPage();
    expect(await page.inputValue("#api-key")).toBe(devKey); // pre-filled from the in-memory store
    const uploads: string[] = [];
    page.on("request", (r) => r.url().endsWith("/v1/palm/analyze") && uploads.push(r.headers()["content-type"] ?? ""));
    await expectPageShowsApiAnswer(page, SAMPLE, "web-page.png");
    // The photo goes up as a file, not as base64 in JSON.
    expect(uploads).toEqual([expect.stringMatching(/^multipart\/form-data; boundary=/)]);

    // Toggling a line's mask hides exactly that layer.
    await page.uncheck('#layers input[data-line="head"]');
    expect(await page.isHidden('canvas.mask[data-line="head"]')).toBe(true);
    expect(await page.isVisible('canvas.mask[data-line="life"]')).toBe(true);
    await page.close();
  });

  it("paints each line's mask as the API returns it, on a second photo where lines are found", async () => {
    // test/fixtures/palms/hand-0.jpg: a synthetic hand on which the engine finds lines, so that
    // the mask comparison compares painted pixels, not two zeros, whatever the sample gives.
    const page = await openPage();
    const found = await expectPageShowsApiAnswer(page, HAND, "web-page-hand.png");
    expect(found).toBeGreaterThan(0);
    await page.close();
  });

  it.each([
    ["no hand", NO_HAND],
    ["the back of a hand", BACK_OF_HAND],
  ])("shows no line and the API's reason for a photo of %s", async (_what, file) => {
    const expected = await restAnalyze(file);
    expect(expected.results.reason).not.toBe(""); // the API reports no line, and says why
    const page = await openPage();
    await uploadAndWait(page, file);
    expect(await page.textContent("#detected-count")).toBe("0");
    expect(await page.getAttribute("#reason", "data-reason")).toBe(expected.results.reason);
    expect(await page.textContent("#summary")).toMatch(/^0 of 3 lines found: \w/);
    await page.close();
  });

  it("shows the rate left at once, and a rate_limited refusal with when to try again", async () => {
    // A client of its own on a plan of one request at once, refilled every 100 s.
    await srv.store.setPlanRateLimit("free", { rate: 0.01, burst: 1, concurrency: 1 });
    const freeKey = await registerKey(srv.store, "free-client", "free");
    const page = await openPage();
    await page.fill("#api-key", freeKey);
    await uploadAndWait(page, SAMPLE);
    expect(await page.getAttribute("body", "data-state")).toBe("done");
    expect(await page.textContent("#quota-text")).toMatch(/ Rate: 0 of 1 requests left at once\.$/);
    await page.setInputFiles("#photo", HAND);
    await page.waitForSelector("body[data-state='error']", { timeout: 60_000 });
    expect(await page.textContent("#error")).toMatch(/^rate_limited: .* Try again in \d+ s\./);
    await page.close();
  });

  it("shows the error code of a refused key and no result", async () => {
    const page = await openPage();
    await page.fill("#api-key", "palm_live_00000000000000000000000000000000");
    await uploadAndWait(page, SAMPLE);
    expect(await page.getAttribute("body", "data-state")).toBe("error");
    expect(await page.textContent("#error")).toMatch(/^invalid_api_key: /);
    expect(await page.isHidden("#result")).toBe(true);
    await page.close();
  });

  it("renders the OpenAPI document at /docs with the locally served viewer, every route listed", async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    const foreign: string[] = [];
    page.on("pageerror", (e) => problems.push(e.message));
    page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
    page.on("request", (r) => !r.url().startsWith(srv.url) && !r.url().startsWith("data:") && foreign.push(r.url()));
    await page.goto(`${srv.url}/docs`);
    await page.waitForSelector(".opblock-summary-path", { timeout: 30_000 });
    const paths = await page.$$eval(".opblock-summary-path", (els) => els.map((e) => e.getAttribute("data-path")));
    const doc = await (await fetch(`${srv.url}/openapi.json`)).json();
    expect(paths.sort()).toEqual(Object.keys(doc.paths).sort());
    expect(foreign).toEqual([]); // nothing from a CDN
    expect(problems).toEqual([]);
    await page.close();
  });
});
