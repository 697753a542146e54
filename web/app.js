// The demo page: one photo in, the service's answer out. It calls the public REST API
// (POST /v1/palm/analyze) exactly as any other client does; nothing here is private to the page.

const LINES = ["heart", "head", "life"];
/** Mask colours (RGB), the same hues as the service's overlay. */
const COLORS = { heart: [255, 40, 40], head: [40, 110, 255], life: [40, 200, 60] };
/** Readable text for the `reason` a response gives when no line was found. */
const REASONS = {
  no_hand: "no hand was found in the photo",
  back_of_hand: "the photo shows the back of a hand, not a palm",
  lines_unclear: "a palm was found, but its lines are not clear enough",
};

const $ = (id) => document.getElementById(id);
const form = $("analyze-form");
const keyInput = $("api-key");
const fileInput = $("photo");
const dropZone = $("drop-zone");
const button = $("analyze");
let file;
let photoUrl;

init();

async function init() {
  try {
    const res = await fetch("/web/config.json");
    const config = res.ok ? await res.json() : {};
    if (config.devKey && keyInput.value === "") {
      keyInput.value = config.devKey;
      $("key-note").hidden = false;
    }
  } catch {
    // The page works without it: the key is typed in.
  }
  fileInput.addEventListener("change", () => choose(fileInput.files[0]));
  dropZone.addEventListener("dragover", (e) => {
    e.preventDefault();
    dropZone.classList.add("over");
  });
  dropZone.addEventListener("dragleave", () => dropZone.classList.remove("over"));
  dropZone.addEventListener("drop", (e) => {
    e.preventDefault();
    dropZone.classList.remove("over");
    choose(e.dataTransfer.files[0]);
  });
  keyInput.addEventListener("input", () => (button.disabled = !file || keyInput.value.trim() === ""));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    analyze();
  });
  for (const box of document.querySelectorAll("#layers input[data-line]")) {
    box.addEventListener("change", () => {
      document.querySelector(`canvas.mask[data-line="${box.dataset.line}"]`).hidden = !box.checked;
    });
  }
  for (const radio of document.querySelectorAll('#layers input[name="base"]')) {
    radio.addEventListener("change", () => {
      const photo = radio.value === "photo" && radio.checked;
      $("photo-view").hidden = !photo;
      $("overlay").hidden = photo;
    });
  }
  document.body.dataset.ready = "true";
}

function choose(f) {
  if (!f) return;
  file = f;
  $("file-name").textContent = `${f.name} (${Math.round(f.size / 1024)} KB)`;
  button.disabled = keyInput.value.trim() === "";
  if (!button.disabled) analyze();
}

async function analyze() {
  if (!file) return;
  button.disabled = true;
  $("error").hidden = true;
  $("result").hidden = true;
  document.body.dataset.state = "busy";
  setStatus("Sending the photo…");
  try {
    // Uploaded as a file (multipart/form-data): no base64 on either side.
    const form = new FormData();
    form.append("image", file, file.name);
    const started = performance.now();
    const res = await fetch("/v1/palm/analyze", {
      method: "POST",
      headers: { "x-api-key": keyInput.value.trim() },
      body: form,
    });
    const body = await res.json();
    showQuota(res.headers, body.usage);
    if (!res.ok) {
      const err = body.error ?? {};
      // 429 rate_limited and quota_exceeded, 503 overloaded: say when to try again.
      const retry = res.headers.get("retry-after");
      const when = retry ? ` Try again in ${retry} s.` : "";
      showError(
        `${err.code ?? res.status}: ${err.message ?? res.statusText}${when}${err.request_id ? ` (request ${err.request_id})` : ""}`,
      );
      document.body.dataset.state = "error";
      setStatus("");
      return;
    }
    await showResult(body);
    setStatus(`Answered in ${Math.round(performance.now() - started)} ms.`);
    document.body.dataset.state = "done";
  } catch (e) {
    showError(`The request failed: ${e.message}`);
    document.body.dataset.state = "error";
    setStatus("");
  } finally {
    button.disabled = false;
  }
}

async function showResult(body) {
  const results = body.results ?? {};
  const stats = results.stats ?? {};
  if (photoUrl) URL.revokeObjectURL(photoUrl);
  photoUrl = URL.createObjectURL(file);
  $("photo-view").src = photoUrl;
  const overlay = `data:image/jpeg;base64,${results.overlay}`;
  $("overlay").src = overlay;
  $("download").href = overlay;
  await Promise.all(LINES.map((line) => drawMask(line, results.masks?.[line])));

  let found = 0;
  for (const line of LINES) {
    const s = stats[line] ?? {};
    if (s.detected) found++;
    const row = document.querySelector(`#stats tr[data-line="${line}"]`);
    row.dataset.detected = String(Boolean(s.detected));
    row.querySelector(".detected").textContent = s.detected ? "yes" : "no";
    row.querySelector(".pixels").textContent = (s.pixels ?? 0).toLocaleString("en");
    row.querySelector(".confidence").textContent = (s.confidence ?? 0).toFixed(3);
    row.querySelector(".coverage").textContent = `${(s.coverage ?? 0).toFixed(2)} %`;
  }
  $("detected-count").textContent = String(found);
  showTraits(stats, results.head_life_start, results.hand?.shape);
  // `results.reason` says why no line is reported ("" when lines are).
  const reason = typeof results.reason === "string" ? results.reason : "";
  $("reason").textContent = reason ? `: ${REASONS[reason] ?? reason.replaceAll("_", " ")}` : "";
  $("reason").dataset.reason = reason;
  const hand = results.hand?.handedness ? ` · ${results.hand.handedness} hand` : "";
  $("meta").textContent = `${body.id} · model ${body.model}${hand}`;
  $("result").hidden = false;
}

/** Where a line end lies, in words: the finger it is under, the thumb side, or the wrist. */
const ZONES = { thumb_side: "thumb side", wrist: "near the wrist" };
const zone = (end) => (end ? (ZONES[end.zone] ?? `under the ${end.zone} finger`) : "");

/**
 * showTraits fills the traits table (a detected line's `traits`; an undetected line has none and
 * its row says so), whether head and life start joined, and the hand's shape.
 */
function showTraits(stats, headLife, shape) {
  for (const line of LINES) {
    const t = stats[line]?.traits;
    const row = document.querySelector(`#traits tr[data-line="${line}"]`);
    row.dataset.detected = String(Boolean(t));
    const cell = (name, text) => (row.querySelector(`.t-${name}`).textContent = text);
    if (!t) {
      for (const name of ["curvature", "depth", "breaks", "forks", "start", "end"]) cell(name, "");
      cell("length", "not found: no traits");
      continue;
    }
    cell("length", `${t.length} (${(stats[line].length ?? 0).toFixed(2)} palm widths)`);
    cell("curvature", `${t.curvature_label.replaceAll("_", " ")} (${t.curvature.toFixed(3)})`);
    cell("depth", `${t.depth_label} (${t.depth.toFixed(3)})`);
    cell(
      "breaks",
      t.breaks.length ? t.breaks.map((b) => `at ${Math.round(b.at * 100)} %, ${b.length.toFixed(2)} long`).join("; ") : "none",
    );
    cell("forks", t.forks.length ? t.forks.map((f) => `at the ${f.near}, ${f.length.toFixed(2)} long`).join("; ") : "none");
    cell("start", zone(t.start));
    cell("end", zone(t.end));
  }
  $("head-life").textContent = headLife
    ? `Head and life lines start ${headLife.joined ? "joined" : "apart"} (gap ${headLife.gap.toFixed(3)} palm widths).`
    : "";
  $("hand-shape").textContent = shape
    ? `Hand shape: ${shape.hand_type} hand, ${shape.palm} palm (length ${shape.palm_ratio.toFixed(2)} x its width), ` +
      `${shape.finger_length} fingers (middle ${shape.fingers.middle.toFixed(2)} x the palm), index/ring ${shape.index_ring_ratio.toFixed(2)}.` +
      (shape.fingers_in_photo ? "" : " The fingertips are outside the photo: the finger values are estimates.")
    : "";
}

/** drawMask paints one single-channel mask PNG (255 on the line) in the line's colour. */
async function drawMask(line, base64) {
  const canvas = document.querySelector(`canvas.mask[data-line="${line}"]`);
  if (!base64) {
    canvas.width = canvas.height = 0;
    return;
  }
  const img = new Image();
  img.src = `data:image/png;base64,${base64}`;
  await img.decode();
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(img, 0, 0);
  const data = ctx.getImageData(0, 0, canvas.width, canvas.height);
  const [r, g, b] = COLORS[line];
  const px = data.data;
  for (let i = 0; i < px.length; i += 4) {
    const on = px[i] > 127;
    px[i] = r;
    px[i + 1] = g;
    px[i + 2] = b;
    px[i + 3] = on ? 200 : 0;
  }
  ctx.putImageData(data, 0, 0);
}

function showQuota(headers, usage) {
  const limit = headers.get("x-monthly-quota-limit") ?? usage?.requests_limit;
  const remaining = headers.get("x-monthly-quota-remaining") ?? (usage ? usage.requests_limit - usage.requests_used : null);
  const reset = headers.get("x-monthly-quota-reset") ?? usage?.resets_at;
  if (limit == null || remaining == null) return;
  const resetText = reset ? `; it resets ${new Date(Number(reset) * 1000).toISOString().slice(0, 10)} (UTC)` : "";
  const plan = usage?.plan ? ` on plan ${usage.plan}` : "";
  // RateLimit (IETF httpapi draft): "burst";r=<left at once>;t=<s until whole>.
  const rate = /;r=(\d+)/.exec(headers.get("ratelimit") ?? "");
  const burst = /;q=(\d+)/.exec(headers.get("ratelimit-policy") ?? "");
  const rateText = rate && burst ? ` Rate: ${rate[1]} of ${burst[1]} requests left at once.` : "";
  $("quota-text").textContent =
    `${Number(remaining).toLocaleString("en")} of ${Number(limit).toLocaleString("en")} analyses left this month${plan}${resetText}.${rateText}`;
  $("quota").hidden = false;
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = false;
}

function setStatus(text) {
  $("status").textContent = text;
}
