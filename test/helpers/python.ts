/**
 * The Python that runs training/ (Debian's, through /usr/bin/python3: the python3 first on PATH may lack
 * its packages), for the specs that run training code. They run it from the repository's root
 * (`python -m training.X`) and are skipped, with a warning naming the packages, where it cannot run.
 */
import { spawnSync } from "node:child_process";

export const PYTHON = "/usr/bin/python3";
/** The repository's root: the working directory training/ is run from. */
export const repoRoot = new URL("../../", import.meta.url).pathname;

const DEBIAN: Record<string, string> = {
  torch: "python3-torch",
  onnx: "python3-onnx",
  numpy: "python3-numpy",
  cv2: "python3-opencv",
  skimage: "python3-skimage",
};

/** Whether PYTHON imports every one of `modules`; where it does not, warns that `what` is skipped and how to fix it. */
export function pythonImports(what: string, modules: string[]): boolean {
  const ok = spawnSync(PYTHON, ["-c", `import ${modules.join(", ")}`], { stdio: "ignore" }).status === 0;
  if (!ok) {
    const apt = modules.map((m) => DEBIAN[m] ?? m).join(" ");
    console.warn(`${what}: skipped, ${PYTHON} cannot import ${modules.join(", ")} (apt-get install ${apt})`);
  }
  return ok;
}
