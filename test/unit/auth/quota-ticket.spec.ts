import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { createMemoryStore } from "../../../src/auth/memory-store.js";
import { quotaPeriodOf } from "../../../src/auth/quota-period.js";
import { createQuotaTicket } from "../../../src/auth/quota-ticket.js";
import { catchError } from "../../helpers/in-memory.js";

const now = () => new Date("2030-06-15T12:00:00Z");
const period = quotaPeriodOf(now());

function setup(limit = 2) {
  const store = createMemoryStore();
  let n = 0;
  const ticket = () =>
    createQuotaTicket({ store, clientId: "acme", plan: "free", limit, period, reservationId: `r${++n}`, leaseMs: 60_000, now });
  return { store, ticket };
}

describe("createQuotaTicket()", () => {
  it("goes none, pending, committed, and stays committed on release", async () => {
    const { store, ticket } = setup();
    const t = ticket();
    expect(t.state).toBe("none");
    await t.reserve();
    expect([t.state, await store.usage("acme", period)]).toEqual(["pending", 1]);
    const usage = await t.commit();
    expect(usage).toEqual({ place: 1, limit: 2, plan: "free", resetsAt: period.resetsAt });
    expect(await t.commit()).toBe(usage); // one commit, whoever asks again
    expect([t.state, await t.release(), await store.usage("acme", period)]).toEqual(["committed", 1, 1]);
  });

  it("gives a pending unit back on release", async () => {
    const { store, ticket } = setup();
    const t = ticket();
    await t.reserve();
    expect(await t.release()).toBe(0);
    expect([t.state, await store.usage("acme", period)]).toEqual(["released", 0]);
  });

  it("refuses a reserve that comes after its release, holding nothing (issue 29, finding 4)", async () => {
    const { store, ticket } = setup();
    const t = ticket();
    await t.release();
    const err = await catchError(t.reserve());
    expect(err.findDetails(ErrorInfoSchema)[0]?.reason).toBe("canceled");
    expect([t.state, await store.usage("acme", period)]).toEqual(["released", 0]);
  });

  it("charges nothing when released before any reserve, and reports the units held", async () => {
    const { store, ticket } = setup();
    const first = ticket();
    await first.commit(); // reserves on the way
    const t = ticket();
    expect(await t.release()).toBe(1);
    expect([t.state, await store.usage("acme", period)]).toEqual(["released", 1]);
  });

  it("refuses a reserve past the limit with quota_exceeded and stays none", async () => {
    const { store, ticket } = setup(1);
    await ticket().commit();
    const t = ticket();
    const err = await catchError(t.reserve());
    expect(err.findDetails(ErrorInfoSchema)[0]?.reason).toBe("quota_exceeded");
    expect(t.state).toBe("none");
    expect(await t.release()).toBe(1);
    expect(await store.usage("acme", period)).toBe(1);
  });
});
