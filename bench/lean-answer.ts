/**
 * Lean answers (issue 31): the same 12 MP photo uploaded as the raw file (`image/jpeg`), asking
 * for the full answer and for one without images (`?images=none`), one request at a time; time
 * from sending the request to the last byte of the answer, and the answer's size.
 */
import type { ServerProcess } from "../test/helpers/index.js";
import type { Workload } from "./workloads.js";

/** LeanSample is one request's end-to-end time and answer size. */
export interface LeanSample {
  ms: number;
  bytes: number;
}

/** LeanRound is one paired round: the full answer and the one without images. */
export interface LeanRound {
  full: LeanSample;
  lean: LeanSample;
}

async function once(server: ServerProcess, key: string, w: Workload, query: string): Promise<LeanSample> {
  const t0 = performance.now();
  const res = await fetch(`${server.url}/v1/palm/analyze${query}`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": `image/${w.format}` },
    body: new Uint8Array(w.bytes),
  });
  const body = new Uint8Array(await res.arrayBuffer());
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${new TextDecoder().decode(body).slice(0, 200)}`);
  return { ms, bytes: body.byteLength };
}

/** leanRounds runs `rounds` paired rounds (which side goes first alternates) after one untimed pair. */
export async function leanRounds(server: ServerProcess, key: string, w: Workload, rounds: number): Promise<LeanRound[]> {
  await once(server, key, w, "");
  await once(server, key, w, "?images=none");
  const out: LeanRound[] = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      const full = await once(server, key, w, "");
      out.push({ full, lean: await once(server, key, w, "?images=none") });
    } else {
      const lean = await once(server, key, w, "?images=none");
      out.push({ full: await once(server, key, w, ""), lean });
    }
  }
  return out;
}
