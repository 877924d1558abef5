/**
 * Provider requests (Chat Completions, Responses, Anthropic Messages) rendered from one format-free
 * conversation, each by its format's rules: a Chat `tool` message after the assistant `tool_calls` it
 * answers, a `function_call_output` after its `function_call`, Anthropic alternating with every
 * `tool_result` in the user message right after its `tool_use`.
 */
import fc from 'fast-check';
import type { ProviderRequest } from '../../step.js';
import { skillCatalog, skillPrompt, SKILL_TOOLS, type SkillCatalog } from './skills.js';
import { describeValue, withSummary } from './summary.js';
import { expandOutput, outputSpec, shapeForTool, type SizeClass } from './text.js';
import { TOOL_NAMES, toolArgs } from './tools.js';

/** The wire formats the kit generates. */
export type WireFormat = 'chat' | 'responses' | 'anthropic';
/** The three provider wire formats the request arbitraries can render: Chat Completions, Responses and Anthropic Messages. */
export const WIRE_FORMATS: readonly WireFormat[] = ['chat', 'responses', 'anthropic'];

/** One generated tool call: tool name, arguments, the output it returns and whether that output is an error. */
export interface CallSpec {
  readonly name: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly output: string;
  readonly isError: boolean;
}
/** One assistant step: optional text and the tool calls it makes. */
export interface StepSpec {
  readonly text: string | undefined;
  readonly calls: readonly CallSpec[];
}
/** One user turn: the user's message (optionally with an image), the assistant steps it causes and the final reply. */
export interface TurnSpec {
  readonly user: string;
  readonly image: boolean;
  readonly steps: readonly StepSpec[];
  readonly reply: string;
}
/** A format-free conversation: system text, optional skill catalog, tools and turns. */
export interface Conversation {
  readonly system: string;
  readonly catalog: SkillCatalog | undefined;
  /** Whether `skills_list` / `skill_view` are offered (a skill gate needs both). */
  readonly discoveryTools: boolean;
  readonly tools: readonly string[];
  readonly turns: readonly TurnSpec[];
  readonly seed: number;
  /** How Anthropic `tool_result` contents are written (see {@link RequestOptions.resultContent}). Default: 'mixed'. */
  readonly resultContent?: 'mixed' | 'string' | 'blocks';
  /** How the agent acts (see {@link RequestOptions.protocol}). Default: 'tools'. */
  readonly protocol?: 'tools' | 'text';
}

/** Options of {@link providerRequest}; every field is optional. */
export interface RequestOptions {
  /** Formats to draw from. @defaultValue all three */
  readonly formats?: readonly WireFormat[];
  /** Fewest turns per conversation. @defaultValue 1 */
  readonly minTurns?: number;
  /** Most turns per conversation. @defaultValue 4 */
  readonly maxTurns?: number;
  /** Tool output size classes. @defaultValue tiny, medium and large */
  readonly sizes?: readonly SizeClass[];
  /** Put a skill catalog in the instructions: always, never or sometimes. @defaultValue 'sometimes' */
  readonly skills?: 'always' | 'never' | 'sometimes';
  /**
   * Tool names the calls draw from; names the kit does not know get generic arguments and
   * JSON/Unicode/repeated outputs (e.g. `'weird tool]\n'` to test receipt labels).
   *
   * @defaultValue {@link TOOL_NAMES}
   */
  readonly tools?: readonly string[];
  /**
   * Where system, user and assistant texts come from, e.g. `fc.string({ unit: 'binary' })` for
   * control characters and every Unicode plane.
   *
   * @defaultValue a fixed set of realistic prompts and replies (Unicode included); the user turn
   * that asks about skills stays a skill prompt
   */
  readonly texts?: fc.Arbitrary<string>;
  /** Where tool outputs come from. @defaultValue `toolOutput` of the shape that fits each tool, in `sizes` */
  readonly outputs?: fc.Arbitrary<string>;
  /**
   * How Anthropic `tool_result` contents are written: a plain string, a list of one text block, or
   * alternating between the two (both occur in the wild).
   *
   * @defaultValue 'mixed'
   */
  readonly resultContent?: 'mixed' | 'string' | 'blocks';
  /**
   * How the agent acts: 'tools' (function calling), 'text' (mini-swe-agent's protocol: one fenced
   * ```bash block per assistant message, the output in the next user message as
   * `<returncode>N</returncode>` + `<output>`, no tool definitions), or 'both' (per conversation).
   *
   * @defaultValue 'tools'
   */
  readonly protocol?: 'tools' | 'text' | 'both';
}

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const USER_TEXTS = [
  'Run the tests and fix what fails.',
  'Find where the vault is opened.',
  'Summarise the diff, please 🙏',
  'Why does the build fail on 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 paths?',
  'ok',
];
const REPLIES = [
  'Done: all tests pass.',
  'The vault is opened in src/vault/sqlite.ts.',
  'I changed two files.',
  'Voilà — c’est réparé ✅',
];

function callSpec(options: RequestOptions): fc.Arbitrary<CallSpec> {
  const tools = options.tools ?? TOOL_NAMES;
  if (tools.length === 0) throw new RangeError('conversation: tools must not be empty');
  return fc.constantFrom(...tools).chain((name) =>
    fc.record({
      name: fc.constant(name),
      args: toolArgs(name),
      output: options.outputs ?? outputSpec({ shapes: shapeForTool(name), sizes: options.sizes }).map(expandOutput),
      isError: fc.boolean().map((b) => b && name === 'terminal'),
    }),
  );
}

/**
 * The format-free conversation every request arbitrary renders.
 *
 * @example
 * const requests = fc.sample(conversation().map((c) => renderSession(c, 'chat')), 1)[0];
 */
export function conversation(options: RequestOptions = {}): fc.Arbitrary<Conversation> {
  const texts = (defaults: readonly string[]): fc.Arbitrary<string> => options.texts ?? fc.constantFrom(...defaults);
  const step = fc.record({
    text: fc.option(texts(['Let me look.', 'Running it now.', 'Checking… 🔍']), { nil: undefined }),
    calls: fc.array(callSpec(options), { minLength: 1, maxLength: 2 }),
  });
  const turn = fc.record({
    user: texts(USER_TEXTS),
    image: fc.nat(4).map((n) => n === 0),
    steps: fc.array(step, { maxLength: 2 }),
    reply: texts(REPLIES),
  });
  const skills = options.skills ?? 'sometimes';
  const catalog =
    skills === 'never'
      ? fc.constant(undefined)
      : skills === 'always'
        ? skillCatalog()
        : fc.option(skillCatalog(), { nil: undefined });
  return fc
    .record({
      system: texts(['You are a careful coding agent.', 'You are Hermes, an autonomous agent. Use tools when useful.']),
      catalog,
      discoveryTools: fc.boolean(),
      turns: fc.array(turn, { minLength: options.minTurns ?? 1, maxLength: options.maxTurns ?? 4 }),
      duplicates: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 2 }),
      seed: fc.nat(),
      text:
        options.protocol === 'text'
          ? fc.constant(true)
          : options.protocol === 'both'
            ? fc.boolean()
            : fc.constant(false),
    })
    .chain((c) =>
      (c.catalog === undefined ? fc.constant(undefined) : skillPrompt(c.catalog)).map((prompt: string | undefined) => ({
        c,
        prompt,
      })),
    )
    .map(({ c, prompt }): Conversation => {
      let turns: readonly TurnSpec[] = c.turns;
      // The last user turn asks about skills when a catalog is present, so routing has a prompt to score.
      if (prompt !== undefined) turns = turns.map((t, i) => (i === turns.length - 1 ? { ...t, user: prompt } : t));
      turns = applyDuplicates(turns, c.duplicates);
      const tools = [...new Set(turns.flatMap((t) => t.steps.flatMap((s) => s.calls.map((x) => x.name))))];
      return {
        system: c.system,
        catalog: c.catalog,
        discoveryTools: c.discoveryTools,
        tools: tools.length > 0 ? tools : ['terminal'],
        turns,
        seed: c.seed,
        ...(c.text ? { protocol: 'text' as const } : {}),
        ...(options.resultContent === undefined ? {} : { resultContent: options.resultContent }),
      };
    });
}

// Copy an earlier call over a later one (the same command run twice): what duplicate collapse acts on.
function applyDuplicates(turns: readonly TurnSpec[], pairs: readonly (readonly [number, number])[]): TurnSpec[] {
  const calls = turns.flatMap((t, ti) => t.steps.flatMap((s, si) => s.calls.map((c, ci) => ({ ti, si, ci, c }))));
  const out = turns.map((t) => ({ ...t, steps: t.steps.map((s) => ({ ...s, calls: [...s.calls] })) }));
  if (calls.length < 2) return out;
  for (const [a, b] of pairs) {
    const [i, j] = [a % calls.length, b % calls.length].sort((x, y) => x - y) as [number, number];
    if (i === j) continue;
    const from = calls[i]!;
    const to = calls[j]!;
    out[to.ti]!.steps[to.si]!.calls[to.ci] = from.c;
  }
  return out;
}

/** Ids are unique per conversation by construction: turn, step and call index plus a per-format prefix. */
function callId(format: WireFormat, seed: number, t: number, s: number, k: number): string {
  const tag = (seed % 0xfffff).toString(36);
  return format === 'anthropic' ? `toolu_${tag}${t}${s}${k}_${t}_${s}_${k}` : `call_${tag}_${t}_${s}_${k}`;
}

function systemText(c: Conversation): string {
  return c.catalog === undefined
    ? c.system
    : `${c.system}\n\n${c.catalog.block}\n\nLoad a skill with skill_view before using it.`;
}

function toolDefs(c: Conversation, format: WireFormat): unknown[] {
  const defs = c.tools.map((name) => ({
    name,
    description: `The ${name} tool`,
    parameters: { type: 'object', properties: {}, additionalProperties: true },
  }));
  return [...defs, ...(c.discoveryTools ? SKILL_TOOLS : [])].map(({ name, description, parameters }) =>
    format === 'chat'
      ? { type: 'function', function: { name, description, parameters } }
      : format === 'responses'
        ? { type: 'function', name, description, parameters }
        : { name, description, input_schema: parameters },
  );
}

function userContent(format: WireFormat, text: string, image: boolean): unknown {
  if (!image) return text;
  if (format === 'chat')
    return [
      { type: 'text', text },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
    ];
  if (format === 'responses')
    return [
      { type: 'input_text', text },
      { type: 'input_image', image_url: `data:image/png;base64,${PNG}`, detail: 'auto' },
    ];
  return [
    { type: 'text', text },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
  ];
}

/** One rendered conversation item plus whether a request may end right after it. */
interface Rendered {
  readonly items: unknown[];
  /** Indices (exclusive ends) where a host sends a request: after a user message, after tool outputs. */
  readonly cuts: number[];
}

function renderItems(c: Conversation, format: WireFormat): Rendered {
  const items: unknown[] = [];
  const cuts: number[] = [];
  if (format === 'chat') items.push({ role: c.seed % 3 === 0 ? 'developer' : 'system', content: systemText(c) });
  c.turns.forEach((turn, t) => {
    const content = userContent(format, turn.user, turn.image);
    items.push(format === 'responses' ? { type: 'message', role: 'user', content } : { role: 'user', content });
    cuts.push(items.length);
    turn.steps.forEach((step, s) => {
      const ids = step.calls.map((_, k) => callId(format, c.seed, t, s, k));
      if (c.protocol === 'text') {
        // One command per assistant message, its output in the next user message.
        step.calls.forEach((call, k) => {
          const said = `${k === 0 ? (step.text ?? 'Next.') : 'Then:'}\n\n\`\`\`bash\n${commandLine(call)}\n\`\`\``;
          const observed = `<returncode>${call.isError ? 1 : 0}</returncode>\n<output>\n${call.output}\n</output>`;
          items.push(textItem(format, 'assistant', said), textItem(format, 'user', observed));
          cuts.push(items.length);
        });
        return;
      }
      if (format === 'chat') {
        items.push({
          role: 'assistant',
          content: step.text ?? null,
          tool_calls: step.calls.map((call, k) => ({
            id: ids[k],
            type: 'function',
            function: { name: call.name, arguments: JSON.stringify(call.args) },
          })),
        });
        step.calls.forEach((call, k) => items.push({ role: 'tool', tool_call_id: ids[k], content: call.output }));
      } else if (format === 'responses') {
        if (step.text !== undefined) items.push(textItem(format, 'assistant', step.text));
        step.calls.forEach((call, k) =>
          items.push({ type: 'function_call', call_id: ids[k], name: call.name, arguments: JSON.stringify(call.args) }),
        );
        step.calls.forEach((call, k) =>
          items.push({ type: 'function_call_output', call_id: ids[k], output: call.output }),
        );
      } else {
        const text = step.text === undefined ? [] : [{ type: 'text', text: step.text }];
        items.push({
          role: 'assistant',
          content: [
            ...text,
            ...step.calls.map((call, k) => ({ type: 'tool_use', id: ids[k], name: call.name, input: call.args })),
          ],
        });
        items.push({
          role: 'user',
          content: step.calls.map((call, k) => {
            // Both content shapes occur in the wild: a plain string and a list of text blocks.
            const shape = c.resultContent ?? 'mixed';
            const body =
              shape === 'string' || (shape === 'mixed' && k % 2 === 0)
                ? call.output
                : [{ type: 'text', text: call.output }];
            return {
              type: 'tool_result',
              tool_use_id: ids[k],
              content: body,
              ...(call.isError ? { is_error: true } : {}),
            };
          }),
        });
      }
      cuts.push(items.length);
    });
    items.push(textItem(format, 'assistant', turn.reply));
  });
  return { items, cuts };
}

/** The command a text-protocol agent writes for a call: its `command` argument, else the tool and its arguments. */
function commandLine(call: CallSpec): string {
  const command = call.args['command'];
  return typeof command === 'string' && command.trim() !== '' && !command.includes('```')
    ? command
    : `${call.name} ${JSON.stringify(call.args)}`;
}

/** A plain text message of one format. */
function textItem(format: WireFormat, role: 'user' | 'assistant', text: string): unknown {
  if (format === 'responses')
    return { type: 'message', role, content: [{ type: role === 'user' ? 'input_text' : 'output_text', text }] };
  if (format === 'anthropic')
    return role === 'user' ? { role, content: text } : { role, content: [{ type: 'text', text }] };
  return { role, content: text };
}

/**
 * Render a conversation (or its prefix up to `cut` items) as a request of one format.
 *
 * @example
 * import { conversation, renderRequest } from 'token-terminator/testing';
 * import fc from 'fast-check';
 * fc.assert(fc.property(conversation(), (c) => renderRequest(c, 'chat')['model'] === renderRequest(c, 'chat')['model']));
 */
export function renderRequest(c: Conversation, format: WireFormat, cut?: number): ProviderRequest {
  const { items, cuts } = renderItems(c, format);
  const end = cut ?? cuts[cuts.length - 1] ?? items.length;
  const list = items.slice(0, end);
  // A text-protocol agent is offered no tools: its commands are in its text.
  const tools = c.protocol === 'text' ? {} : { tools: toolDefs(c, format) };
  if (format === 'chat') return { model: 'gpt-4o', messages: list, ...tools, max_completion_tokens: 4096 };
  if (format === 'responses')
    return { model: 'gpt-5', instructions: systemText(c), input: list, ...tools, max_output_tokens: 8192 };
  const system = c.seed % 2 === 0 ? systemText(c) : [{ type: 'text', text: systemText(c) }];
  return { model: 'claude-sonnet-4-5', max_tokens: 8192, system, messages: list, ...tools };
}

/**
 * Every request a host would send over this conversation, in order (each extends the previous).
 *
 * @example
 * import { conversation, renderSession } from 'token-terminator/testing';
 * import fc from 'fast-check';
 * const [c] = fc.sample(conversation(), 1);
 * const requests = renderSession(c!, 'responses'); // each request extends the one before
 */
export function renderSession(c: Conversation, format: WireFormat): ProviderRequest[] {
  return renderItems(c, format).cuts.map((cut) => renderRequest(c, format, cut));
}

function summarize(format: WireFormat, request: ProviderRequest): string {
  const list = (format === 'responses' ? request['input'] : request['messages']) as readonly Record<string, unknown>[];
  const parts = list.map((m) => {
    const label = typeof m['role'] === 'string' ? (m['role'] as string) : String(m['type']);
    if (Array.isArray(m['tool_calls'])) return `${label}(${m['tool_calls'].length} calls)`;
    const body = m['content'] ?? m['output'];
    if (Array.isArray(body)) {
      const kinds = body.map((b: { type?: unknown; content?: unknown; text?: unknown }) =>
        b.type === 'tool_result'
          ? `tool_result ${describeValue(typeof b.content === 'string' ? b.content : JSON.stringify(b.content))}`
          : String(b.type),
      );
      return `${label}[${kinds.join(', ')}]`;
    }
    return `${label}(${describeValue(body)})`;
  });
  return `${format} request: ${parts.join(' ')}`;
}

/**
 * One request of one format, ending where a host would send it (after a user turn or tool outputs).
 *
 * @example
 * import { formatRequest } from 'token-terminator/testing';
 * import fc from 'fast-check';
 * fc.assert(fc.property(formatRequest('anthropic'), (request) => Array.isArray(request['messages'])));
 */
export function formatRequest(format: WireFormat, options: RequestOptions = {}): fc.Arbitrary<ProviderRequest> {
  return conversation(options).chain((c) => {
    const { cuts } = renderItems(c, format);
    return fc.constantFrom(...cuts).map((cut) => {
      const request = renderRequest(c, format, cut);
      return withSummary(request as Record<string, unknown>, () => summarize(format, request));
    });
  });
}

/**
 * A Chat Completions request with tool calls and tool outputs.
 *
 * @example
 * fc.sample(chatRequest({ sizes: ['large'] }), 1);
 */
export const chatRequest = (options: RequestOptions = {}): fc.Arbitrary<ProviderRequest> =>
  formatRequest('chat', options);
/**
 * A Responses API request with `function_call` / `function_call_output` items.
 *
 * @example
 * fc.sample(responsesRequest(), 1);
 */
export const responsesRequest = (options: RequestOptions = {}): fc.Arbitrary<ProviderRequest> =>
  formatRequest('responses', options);
/**
 * An Anthropic Messages request with `tool_use` / `tool_result` blocks.
 *
 * @example
 * fc.sample(anthropicRequest({ skills: 'never' }), 1);
 */
export const anthropicRequest = (options: RequestOptions = {}): fc.Arbitrary<ProviderRequest> =>
  formatRequest('anthropic', options);

/**
 * A request of any of the chosen formats.
 *
 * @example
 * fc.assert(fc.property(providerRequest({ formats: ['chat'], maxTurns: 2 }), (request) => detectFormat(request) === 'chat'));
 */
export function providerRequest(options: RequestOptions = {}): fc.Arbitrary<ProviderRequest> {
  const formats = options.formats ?? WIRE_FORMATS;
  if (formats.length === 0) throw new RangeError('providerRequest: formats must not be empty');
  return fc.constantFrom(...formats).chain((f) => formatRequest(f, options));
}

/** Options of {@link requestStream}: those of {@link providerRequest} plus the stream length. */
export interface StreamOptions extends RequestOptions {
  /** Fewest requests per stream. @defaultValue 1 */
  readonly minLength?: number;
  /** Most requests per stream. @defaultValue 3 */
  readonly maxLength?: number;
}

/**
 * Independent requests pushed through one subscription (one session).
 *
 * @example
 * test.prop([requestStream({ maxLength: 5 })])('never grows', async (requests) => { … });
 */
export function requestStream(options: StreamOptions = {}): fc.Arbitrary<readonly ProviderRequest[]> {
  return fc
    .array(providerRequest(options), { minLength: options.minLength ?? 1, maxLength: options.maxLength ?? 3 })
    .map((rs) => withSummary(rs, () => `requests:\n  ${rs.map((r) => fc.stringify(r)).join('\n  ')}`));
}

/**
 * A growing multi-turn session: the successive requests a host sends for one conversation, each
 * extending the previous one (same system and tools, more items). Formats are not mixed.
 *
 * @example
 * test.prop([growingSession()])('keeps the prefix', async (requests) => { … });
 */
export function growingSession(options: RequestOptions = {}): fc.Arbitrary<readonly ProviderRequest[]> {
  const formats = options.formats ?? WIRE_FORMATS;
  if (formats.length === 0) throw new RangeError('growingSession: formats must not be empty');
  return fc.tuple(fc.constantFrom(...formats), conversation({ minTurns: 2, ...options })).map(([format, c]) => {
    const session = renderSession(c, format);
    const last = session[session.length - 1]!;
    return withSummary(
      session,
      () => `${format} session of ${session.length} requests; last = ${summarize(format, last)}`,
    );
  });
}
