/**
 * The uniform view of a provider request: the three wire formats (Chat Completions, Responses,
 * Anthropic Messages) read as one list of slots, each naming the exact place (a path from the
 * request root) its value came from, so a changed value can be written back into the same shape.
 */
import type { RequestFormat } from '../step.js';

/** A path from the request root: object keys and array indices. */
export type SlotPath = readonly (string | number)[];

/**
 * What a slot holds.
 * - `instructions`: system / developer / `instructions` text (a string, or one text block's text).
 * - `tool_schemas`: the request's `tools` (or legacy `functions`) array.
 * - `user`, `assistant`: a conversation message (the whole message object).
 * - `tool_call`: one call the assistant made (name + parsed arguments).
 * - `tool_output`: one tool result's content (string or content parts), with its call id and the
 *   tool name resolved from the matching call.
 */
export type SlotKind = 'instructions' | 'tool_schemas' | 'user' | 'assistant' | 'tool_call' | 'tool_output';

/** One piece of a request a stage may read or replace (instructions, a message text, a tool output …), with where it lives. */
export interface Slot {
  readonly kind: SlotKind;
  /** Where `value` lives in the request. */
  readonly path: SlotPath;
  /** The value at `path` (shared with the caller's request: never mutate it). */
  readonly value: unknown;
  /** Index of the conversation item (message / input item) this slot belongs to, if any. */
  readonly item?: number;
  /** Plain text for instructions (always) and for user/assistant messages whose content is text. */
  readonly text?: string;
  /** tool_call / tool_output: the call id linking the two. */
  readonly callId?: string;
  /** tool_call: the tool's name; tool_output: resolved from the matching call (`tool` when unknown). */
  readonly toolName?: string;
  /** tool_call: arguments parsed from JSON text (objects only; anything else → `{}`). */
  readonly args?: Readonly<Record<string, unknown>>;
  /** tool_output: the arguments of the matching call (`{}` when unknown). */
  readonly callArgs?: Readonly<Record<string, unknown>>;
  /** instructions: true when the text sits in a system/developer conversation item (not top level). */
  readonly inConversation?: boolean;
}

/** Coarse role of one conversation item, shared by all formats. */
export type ItemRole = 'system' | 'user' | 'assistant' | 'tool' | 'other';

/** What one conversation item is, independent of the wire format: its role and whether it starts a step. */
export interface ItemInfo {
  readonly role: ItemRole;
  /**
   * True for a user item that starts a new step (it carries text or images, not only tool results);
   * Anthropic user messages made only of `tool_result` blocks are tool items in disguise.
   */
  readonly userText: boolean;
}

/** A request read through the model. */
export interface RequestView {
  readonly format: RequestFormat;
  /** The key of the conversation list (`messages` or `input`), when the request has one. */
  readonly listKey?: 'messages' | 'input';
  /** The conversation list itself (the caller's array, shared), or [] when there is none. */
  readonly items: readonly unknown[];
  /** One entry per item, same order. */
  readonly itemInfo: readonly ItemInfo[];
  readonly slots: readonly Slot[];
}

/** One change to write back: the new value for the place at `path`. */
export interface SlotChange {
  readonly path: SlotPath;
  readonly value: unknown;
}
