/**
 * The two clients of the abuse-victim scenarios (bench/abuse.ts) in a process of their own, so
 * that the bench can place them on CPUs apart from the server's, or below its priority: the
 * parent starts this file (`node --import tsx`, through `taskset` or `nice` as the layout says)
 * with an IPC channel and asks it for one phase at a time.
 *
 * Messages in: {@link ClientsInit} once (answered `{ type: "ready" }` after one untimed victim
 * request), then {@link PhaseRequest} per phase (answered with {@link PhaseDone}), then
 * `{ type: "exit" }`.
 */
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { postLarge } from "../test/helpers/upload.js";

/** The phases of bench/abuse.ts's abuseVictim: the victim alone, then under each of issue 29's abuses 1-3. */
export const PHASES = ["alone", "short deadlines (1)", "invalid base64 bodies (2)", "many-scan JPEG (3)"] as const;
export type Phase = (typeof PHASES)[number];

/** ClientsInit tells the clients where the server is, their keys, and the files of their bodies. */
export interface ClientsInit {
  type: "init";
  url: string;
  port: number;
  victimKey: string;
  attackerKey: string;
  /** Paths of the request bodies: the victim's JSON, abuse (1)'s JSON, (2)'s invalid base64 JSON, (3)'s JPEG. */
  files: { victim: string; deadline: string; invalid: string; manyScans: string };
}

/** PhaseRequest asks for one phase of `seconds`. */
export interface PhaseRequest {
  type: "phase";
  phase: Phase;
  seconds: number;
}

/** PhaseDone is one phase as the clients saw it. */
export interface PhaseDone {
  type: "done";
  /** Victim request times, ms (answers of any status). */
  ms: number[];
  /** Victim answers by status. */
  statuses: Record<number, number>;
  /** The attacker's answers by "status code". */
  attacks: Record<string, number>;
  /** CPU seconds this process used in the phase (both clients). */
  cpuSeconds: number;
}

/** post sends one request with fetch. */
export const post = (url: string, headers: Record<string, string>, body: Uint8Array | string) =>
  fetch(url, { method: "POST", headers, body: typeof body === "string" ? body : new Uint8Array(body) });

/** codeOf reads an answer's "status code" (the REST or Connect error code, if any). */
export async function codeOf(res: Response): Promise<string> {
  const text = await res.text();
  let code = "";
  try {
    const json = JSON.parse(text) as { code?: string; error?: { code?: string } };
    code = json.error?.code ?? json.code ?? "";
  } catch {}
  return `${res.status} ${code}`.trim();
}

/**
 * answerOf is an attacker's answer as codeOf reads it, or the code of the error that ended the
 * request (a large upload cut by the server's bounded lingering close is EPIPE or ECONNRESET):
 * the attacker counts it and goes on, as postLarge (test/helpers/upload.ts) does.
 */
async function answerOf(send: () => Promise<Response>): Promise<string> {
  try {
    return await codeOf(await send());
  } catch (e) {
    const cause = (e as { cause?: NodeJS.ErrnoException }).cause;
    return cause?.code ?? (e as NodeJS.ErrnoException).code ?? "error";
  }
}

/** clientsOf returns the victim's request and each phase's attacker. */
function clientsOf(init: ClientsInit) {
  const { url, port, victimKey, attackerKey } = init;
  const analyze = `${url}/v1/palm/analyze`;
  const victimBody = readFileSync(init.files.victim, "utf8");
  const deadlineBody = readFileSync(init.files.deadline, "utf8");
  const invalid = readFileSync(init.files.invalid);
  const manyScans = readFileSync(init.files.manyScans);
  const victim = async (): Promise<number> => {
    const res = await post(analyze, { "content-type": "application/json", "x-api-key": victimKey }, victimBody);
    await res.arrayBuffer();
    return res.status;
  };
  const attackers: Record<Phase, (until: number, tally: (code: string) => void) => Promise<void>> = {
    alone: async () => {},
    "short deadlines (1)": async (until, tally) => {
      while (Date.now() < until) {
        tally(
          await answerOf(() =>
            post(
              `${url}/palm.v1.PalmService/Analyze`,
              { "content-type": "application/json", "connect-timeout-ms": "100", "x-api-key": attackerKey },
              deadlineBody,
            ),
          ),
        );
      }
    },
    "invalid base64 bodies (2)": async (until, tally) => {
      while (Date.now() < until) {
        for (const code of await Promise.all(Array.from({ length: 14 }, () => postLarge(port, attackerKey, invalid)))) tally(code);
      }
    },
    "many-scan JPEG (3)": async (until, tally) => {
      while (Date.now() < until) {
        tally(await answerOf(() => post(`${analyze}?images=none`, { "content-type": "image/jpeg", "x-api-key": attackerKey }, manyScans)));
      }
    },
  };
  return { victim, attackers };
}

/** runPhase: the attacker from the start, the victim once the attack is under way (300 ms), both until the end. */
async function runPhase(clients: ReturnType<typeof clientsOf>, { phase, seconds }: PhaseRequest): Promise<PhaseDone> {
  const cpu0 = process.cpuUsage();
  const out: PhaseDone = { type: "done", ms: [], statuses: {}, attacks: {}, cpuSeconds: 0 };
  const until = Date.now() + seconds * 1000;
  const attack = clients.attackers[phase](until, (code) => (out.attacks[code] = (out.attacks[code] ?? 0) + 1));
  if (phase !== "alone") await new Promise((res) => setTimeout(res, 300));
  while (Date.now() < until) {
    const t0 = performance.now();
    const status = await clients.victim();
    out.ms.push(performance.now() - t0);
    out.statuses[status] = (out.statuses[status] ?? 0) + 1;
  }
  await attack;
  const cpu = process.cpuUsage(cpu0);
  out.cpuSeconds = (cpu.user + cpu.system) / 1e6;
  return out;
}

// Run as the clients' process (never when imported for its helpers).
if (process.send && process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  let clients: ReturnType<typeof clientsOf> | undefined;
  process.on("message", (m: ClientsInit | PhaseRequest | { type: "exit" }) => {
    void (async () => {
      if (m.type === "init") {
        clients = clientsOf(m);
        // One untimed victim request: the engine and the connection warm.
        await clients.victim();
        process.send?.({ type: "ready" });
      } else if (m.type === "phase" && clients) {
        process.send?.(await runPhase(clients, m));
      } else if (m.type === "exit") {
        process.disconnect();
      }
    })().catch((e: unknown) => {
      process.send?.({ type: "error", message: e instanceof Error ? (e.stack ?? e.message) : String(e) });
    });
  });
}
