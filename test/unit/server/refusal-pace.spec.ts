import { describe, expect, it } from "vitest";
import { createRefusalPace } from "../../../src/server/refusal-pace.js";

const MiB = 1024 * 1024;

/** A pace of 8 MiB a second after a 16 MiB burst, waits up to 1 s, on a clock the test moves. */
function paced(options: { maxPayers?: number } = {}) {
  let t = 1000;
  const pace = createRefusalPace({ bytesPerSecond: 8 * MiB, burstBytes: 16 * MiB, maxWaitMs: 1000, now: () => t, ...options });
  return { pace, advance: (ms: number) => (t += ms) };
}

describe("createRefusalPace()", () => {
  it("answers a client's burst at once, then one 1 MiB refusal every 125 ms", () => {
    const { pace } = paced();
    const waits = Array.from({ length: 20 }, () => pace.turn("c", MiB));
    expect(waits.slice(0, 16)).toEqual(new Array(16).fill({ linger: true, waitMs: 0 }));
    expect(waits.slice(16).map((w) => w.waitMs)).toEqual([125, 250, 375, 500]);
  });

  it("answers at once, without the lingering close, a refusal whose turn is over a second away, and does not count it", () => {
    const { pace, advance } = paced();
    for (let i = 0; i < 23; i++) pace.turn("c", MiB);
    expect(pace.turn("c", MiB)).toEqual({ linger: true, waitMs: 1000 });
    expect(pace.turn("c", MiB)).toEqual({ linger: false, waitMs: 0 });
    expect(pace.turn("c", 64 * 1024)).toEqual({ linger: false, waitMs: 0 });
    // Not counted: 125 ms on, a 1 MiB refusal is due a second away again.
    advance(125);
    expect(pace.turn("c", MiB)).toEqual({ linger: true, waitMs: 1000 });
  });

  it("earns the burst back at its rate, and paces each payer apart", () => {
    const { pace, advance } = paced();
    for (let i = 0; i < 16; i++) pace.turn("c", MiB);
    expect(pace.turn("c", MiB).waitMs).toBe(125);
    expect(pace.turn("other", MiB).waitMs).toBe(0);
    advance(1000);
    // 1 s earns 8 MiB back, of which the refusal that waited took one.
    const waits = Array.from({ length: 8 }, () => pace.turn("c", MiB).waitMs);
    expect(waits).toEqual([0, 0, 0, 0, 0, 0, 0, 125]);
  });

  it("never paces a refusal that leaves nothing to discard", () => {
    const { pace } = paced();
    for (let i = 0; i < 30; i++) pace.turn("c", MiB);
    expect(pace.turn("c", 0)).toEqual({ linger: true, waitMs: 0 });
  });

  it("forgets payers whose burst is whole to remember new ones", () => {
    const { pace, advance } = paced({ maxPayers: 2 });
    for (let i = 0; i < 17; i++) pace.turn("a", MiB);
    pace.turn("b", MiB);
    // Full: a third payer is not paced while both others still owe.
    for (let i = 0; i < 20; i++) expect(pace.turn("c", MiB).waitMs).toBe(0);
    advance(3000);
    for (let i = 0; i < 16; i++) pace.turn("c", MiB);
    expect(pace.turn("c", MiB).waitMs).toBe(125);
  });
});
