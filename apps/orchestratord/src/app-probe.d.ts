export declare const x = 1;
//# sourceMappingURL=app-probe.d.ts.map