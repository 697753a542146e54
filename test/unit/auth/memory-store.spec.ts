import { createMemoryStore } from "../../../src/auth/memory-store.js";
import { describeStore } from "../../helpers/store-suite.js";

describeStore("createMemoryStore()", async () => createMemoryStore());
