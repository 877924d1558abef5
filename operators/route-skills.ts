import { STAGES } from '../src/stages.js';
import { createHash } from 'node:crypto';
import { readRequest, stepFormat, writeSlots, type Slot } from '../src/model/index.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stageOperator, type SessionReducer, type StageOperator } from '../src/operator-kit.js';
import type { Session } from '../src/session/session-cache.js';
import { advance, note, sessionStateKey, storeScope, type ProviderRequest, type Step } from '../src/step.js';
import type { SessionStore } from '../src/vault/ports.js';
import {
  HERMES_DELIMITERS,
  findCatalogs,
  renderCatalog,
  selectSkills,
  type Delimiters,
  type SkillScorer,
  gateCatalogs,
} from '../src/compile/skill-catalog.js';
import { checkOptions, intOption, numberOption } from '../src/options.js';

const STAGE = STAGES.routeSkills;

/** Options of {@link routeSkills}. */
export interface RouteSkillsOptions {
  /** Adds the token half of the acceptance gate when exact. @defaultValue none (characters only) */
  readonly counter?: TokenCounter;
  /** Keep every entry scoring at least this. @defaultValue `2` */
  readonly minScore?: number;
  /** Catalogs with fewer entries are left alone (≥ 1). @defaultValue `8` */
  readonly minCatalogSkills?: number;
  /** Opt-in cap on kept entries; 0 = no cap. @defaultValue `0` */
  readonly maxSkills?: number;
  /** Names always kept. @defaultValue `[]` */
  readonly alwaysKeep?: readonly string[];
  /** Replaces the lexical IDF scorer; a throw falls back to lexical. @defaultValue the lexical IDF scorer */
  readonly scorer?: SkillScorer;
  /** Catalog delimiters. @defaultValue `<available_skills>` … `</available_skills>` */
  readonly delimiters?: Delimiters;
  /** Both must be in the request's tools, or nothing is routed. @defaultValue `['skills_list', 'skill_view']` */
  readonly discoveryTools?: readonly [string, string];
  /** Routed catalogs are remembered here (sticky across restarts). @defaultValue none (memory only) */
  readonly vault?: Pick<SessionStore, 'getRendering' | 'setRendering'>;
}

/**
 * SkillGate: shrink a large skill catalog in trusted instruction text (top-level instructions /
 * system / developer, or system/developer messages) to the entries relevant to the user's prompt,
 * plus one line pointing at the discovery tools for the rest. The routing is sticky per session
 * and catalog: the first prompt decides, later requests reuse the same text (the instructions
 * lead every request, so re-routing would void the provider's prompt cache).
 *
 * @example
 * requests$.pipe(routeSkills({ counter, minScore: 2 }))
 */
export function routeSkills(options: RouteSkillsOptions = {}): StageOperator<ProviderRequest> {
  const minScore = numberOption(STAGE, 'minScore', options.minScore, 2);
  const minCatalog = intOption(STAGE, 'minCatalogSkills', options.minCatalogSkills, 8, 1);
  const maxSkills = intOption(STAGE, 'maxSkills', options.maxSkills, 0, 0);
  const delimiters = options.delimiters ?? HERMES_DELIMITERS;
  checkOptions(STAGE, delimiters.open !== '' && delimiters.close !== '', 'options.delimiters must be non-empty');
  const [listTool, viewTool] = options.discoveryTools ?? ['skills_list', 'skill_view'];
  const route = {
    minScore,
    maxSkills,
    alwaysKeep: options.alwaysKeep ?? [],
    ...(options.scorer === undefined ? {} : { scorer: options.scorer }),
  };
  const counter = options.counter?.exact === true ? options.counter : undefined;
  return stageOperator<ProviderRequest>({ name: STAGE, open: () => ({ reduce }) });
  // Synchronous until there is something to route, so pass-through Steps emit synchronously.
  function reduce(step: Step<ProviderRequest>, session: Session): ReturnType<SessionReducer<ProviderRequest>> {
    // The discovery tools are read first (the request's tool list, as readRequest finds it): most
    // requests stop here without reading the conversation.
    const request = step.value;
    const listed =
      typeof request === 'object' && request !== null ? (request['tools'] ?? request['functions']) : undefined;
    const names = new Set((Array.isArray(listed) ? listed : []).map(toolName));
    if (!names.has(listTool) || !names.has(viewTool)) return undefined;
    const view = readRequest(step.value, { format: stepFormat(step) });
    const tools = view.slots.find((s) => s.kind === 'tool_schemas')?.value;
    if (tools !== listed) return undefined;
    const prompt = [...view.slots].reverse().find((s) => s.kind === 'user')?.text ?? '';
    if (prompt.trim() === '') return undefined;
    const slots = view.slots.filter(
      (s) =>
        s.kind === 'instructions' &&
        s.text !== undefined &&
        findCatalogs(s.text, delimiters).some((b) => b.entries.length >= minCatalog),
    );
    return slots.length === 0 ? undefined : routeSlots(step, slots, prompt, (session.routed ??= new Map()));
  }
  async function routeSlots(
    step: Step<ProviderRequest>,
    slots: readonly Slot[],
    prompt: string,
    sticky: Map<string, string>,
  ): Promise<Step<ProviderRequest>> {
    const changes: { slot: Slot; text: string }[] = [];
    for (const slot of slots) {
      const source = slot.text!;
      const blocks = findCatalogs(source, delimiters).filter((b) => b.entries.length >= minCatalog);
      let text = source;
      for (const b of [...blocks].reverse()) {
        const original = source.slice(b.start, b.end);
        const key = `skills:${createHash('sha256').update(original).digest('hex').slice(0, 32)}`;
        let routed = sticky.get(key) ?? (await options.vault?.getRendering(sessionStateKey(step.context), key));
        if (routed === undefined) {
          routed = renderCatalog(selectSkills(prompt, b.entries, route), b.entries.length, delimiters);
          await options.vault?.setRendering(sessionStateKey(step.context), key, routed, storeScope(step.context));
        }
        sticky.set(key, routed);
        text = text.slice(0, b.start) + routed + text.slice(b.end);
      }
      changes.push({ slot, text });
    }
    const { verdict, rawChars, candidateChars, tokens } = gateCatalogs(changes, counter);
    if (!verdict.accepted) return note(step, { stage: STAGE, kind: 'skipped', reason: verdict.reason });
    const out = writeSlots(
      step.value,
      changes.map((c) => ({ path: c.slot.path, value: c.text })),
    );
    const savedTokens = tokens === undefined ? {} : { savedTokens: tokens.raw - tokens.candidate };
    return advance(step, out, {
      stage: STAGE,
      kind: 'applied',
      reason: 'routed skill catalog',
      savedChars: rawChars - candidateChars,
      ...savedTokens,
    });
  }
}

function toolName(tool: unknown): string | undefined {
  if (typeof tool !== 'object' || tool === null) return undefined;
  const t = tool as { name?: unknown; function?: { name?: unknown } };
  if (typeof t.name === 'string') return t.name;
  return typeof t.function?.name === 'string' ? t.function.name : undefined;
}
