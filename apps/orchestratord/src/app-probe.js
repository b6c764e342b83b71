export const x = 1;
//# sourceMappingURL=app-probe.js.map