/**
 * The request model: Chat Completions, Responses and Anthropic Messages requests read as one
 * list of slots, and changed slots written back into the original shape without touching the
 * caller's objects.
 *
 * @example
 * const view = readRequest(request);
 * const big = view.slots.find((s) => s.kind === 'tool_output' && typeof s.value === 'string' && s.value.length > 8000);
 * const out = big === undefined ? request : writeSlots(request, [{ path: big.path, value: receiptText }]);
 */
export type { ItemInfo, ItemRole, RequestView, Slot, SlotChange, SlotKind, SlotPath } from './types.js';
export { contentText, detectFormat, parseArgs, readRequest, stepFormat, type ReadOptions } from './read.js';
export { valueAt, withItems, writeSlots } from './write.js';
