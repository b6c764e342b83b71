/**
 * ggml tensor types as [block size (elements), block size (bytes)], from `ggml/src/ggml.c`
 * `type_traits` and the block structs of `ggml-common.h` of the pinned llama.cpp (0.5.0).
 * Types that ggml removed (4, 5, 31–33, 36–38) are absent: files using them do not load.
 */
export const GGML_TYPE_SIZES: ReadonlyMap<number, readonly [number, number]> = new Map([
  [0, [1, 4]], // F32
  [1, [1, 2]], // F16
  [2, [32, 18]], // Q4_0
  [3, [32, 20]], // Q4_1
  [6, [32, 22]], // Q5_0
  [7, [32, 24]], // Q5_1
  [8, [32, 34]], // Q8_0
  [9, [32, 36]], // Q8_1
  [10, [256, 84]], // Q2_K
  [11, [256, 110]], // Q3_K
  [12, [256, 144]], // Q4_K
  [13, [256, 176]], // Q5_K
  [14, [256, 210]], // Q6_K
  [15, [256, 292]], // Q8_K
  [16, [256, 66]], // IQ2_XXS
  [17, [256, 74]], // IQ2_XS
  [18, [256, 98]], // IQ3_XXS
  [19, [256, 50]], // IQ1_S
  [20, [32, 18]], // IQ4_NL
  [21, [256, 110]], // IQ3_S
  [22, [256, 82]], // IQ2_S
  [23, [256, 136]], // IQ4_XS
  [24, [1, 1]], // I8
  [25, [1, 2]], // I16
  [26, [1, 4]], // I32
  [27, [1, 8]], // I64
  [28, [1, 8]], // F64
  [29, [256, 56]], // IQ1_M
  [30, [1, 2]], // BF16
  [34, [256, 54]], // TQ1_0
  [35, [256, 66]], // TQ2_0
  [39, [32, 17]], // MXFP4
  [40, [64, 36]], // NVFP4
  [41, [128, 18]], // Q1_0
  [42, [64, 18]], // Q2_0
]);

export const GGML_TYPE_F32 = 0;
export const GGML_TYPE_F16 = 1;

/** GGUF metadata value types (`gguf.h` `enum gguf_type`). */
export const GGUF_TYPE = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** Fixed byte size of a scalar GGUF type; undefined for strings and arrays. */
export function ggufScalarSize(type: number): number | undefined {
  switch (type) {
    case GGUF_TYPE.UINT8:
    case GGUF_TYPE.INT8:
    case GGUF_TYPE.BOOL:
      return 1;
    case GGUF_TYPE.UINT16:
    case GGUF_TYPE.INT16:
      return 2;
    case GGUF_TYPE.UINT32:
    case GGUF_TYPE.INT32:
    case GGUF_TYPE.FLOAT32:
      return 4;
    case GGUF_TYPE.UINT64:
    case GGUF_TYPE.INT64:
    case GGUF_TYPE.FLOAT64:
      return 8;
    default:
      return undefined;
  }
}
