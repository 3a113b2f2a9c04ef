// Entry of the "sdk" package as `bor-contract build` resolves it: `import { n } from "sdk"`.
export * from "./assembly/index";
