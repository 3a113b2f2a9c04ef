// An asc transform `bor-contract build` always applies. The node refuses modules with a
// WebAssembly start function (it would run at instantiation, outside an action), but
// AssemblyScript puts the runtime's set-up and every top-level initializer in one. Compiled
// with `--exportStart __bor_start`, that code becomes a plain function; this transform makes
// the exported `apply` call it first (each action runs in a fresh instance, so it runs once
// per action, metered like the rest), then drops the `__bor_start` export.
const START = "__bor_start";

export default class BorStart {
  afterCompile(module) {
    const binaryen = this.binaryen;
    const startRef = module.getExport(START);
    if (!startRef) return;
    const start = binaryen.getExportInfo(startRef).value;
    const applyRef = module.getExport("apply");
    if (!applyRef) {
      throw new Error("the contract exports no `apply` function: add "
        + "`export function apply(receiver: u64, code: u64, action: u64): void`");
    }
    const apply = binaryen.getExportInfo(applyRef).value;
    const info = binaryen.getFunctionInfo(module.getFunction(apply));
    const params = binaryen.expandType(info.params);
    const i64 = binaryen.i64;
    if (params.length !== 3 || params.some((t) => t !== i64) || info.results !== binaryen.none) {
      throw new Error("`apply` must be (receiver: u64, code: u64, action: u64): void");
    }
    module.removeExport(START);
    module.removeExport("apply");
    const args = params.map((t, i) => module.local.get(i, t));
    module.addFunction("~bor/apply", info.params, binaryen.none, [], module.block(null, [
      module.call(start, [], binaryen.none),
      module.call(apply, args, binaryen.none),
    ]));
    module.addFunctionExport("~bor/apply", "apply");
  }
}
