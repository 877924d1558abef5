/**
 * Fixtures of the reference's structural benchmark, cases 3–8,
 * run through our request stages. Shared by bench/structural.ts and its test.
 */
import { from, lastValueFrom, toArray, type OperatorFunction } from 'rxjs';
import { collapseDuplicates } from '../../../operators/collapse-duplicates.js';
import { compileRequest } from '../../../operators/compile-request.js';
import { canonicalJson } from '../../measure/index.js';
import type { TokenCounter } from '../../measure/types.js';
import { createStep, type ProviderRequest, type Step } from '../../step.js';
import type { Vault } from '../../vault/types.js';

export interface CaseResult {
  readonly name: string;
  readonly rawChars: number;
  readonly rawTokens: number;
  readonly outputChars: number;
  readonly outputTokens: number;
  readonly referenceOutputTokens: number;
  /** Every receipt/note artifact in the output recovered exactly (checked by the caller when given). */
  readonly output: ProviderRequest;
}

type Op = OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>>;

/** `diagnostic line {i}: …` × 6000 (352,889 chars). */
export const caseArtifact = (): string =>
  Array.from({ length: 6000 }, (_, i) => `diagnostic line ${i}: detailed state and repeated evidence`).join('\n');

export function case3Request(artifact = caseArtifact()): ProviderRequest {
  return {
    model: 'benchmark-model',
    messages: [
      { role: 'system', content: 'Stable instructions.' },
      { role: 'user', content: 'Inspect the evidence.' },
      {
        role: 'assistant',
        tool_calls: [{ id: 'call-1', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call-1', content: artifact },
    ],
  };
}

export function case4Request(artifact = caseArtifact()): ProviderRequest {
  const base = case3Request(artifact)['messages'] as unknown[];
  const messages = [...base];
  messages.splice(messages.length - 2, 0, { role: 'tool', tool_call_id: 'older-call', content: artifact });
  return { model: 'benchmark-model', messages };
}

export function case8Request(): ProviderRequest {
  const messages: unknown[] = [{ role: 'system', content: 'System prompt.' }];
  for (let t = 0; t < 8; t++) {
    const content = Array.from(
      { length: 800 },
      (_, i) => `turn_${t} line ${i}: diagnostic evidence block ${i % 20}`,
    ).join('\n');
    messages.push(
      { role: 'user', content: `Question for turn ${t}` },
      {
        role: 'assistant',
        content: `Let me search for turn ${t}.`,
        tool_calls: [{ id: `conv-call-${t}`, type: 'function', function: { name: 'search_files', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: `conv-call-${t}`, content },
      { role: 'assistant', content: `Based on turn ${t} results, done.` },
    );
  }
  return { model: 'benchmark-model', messages };
}

async function run(op: Op, requests: readonly [ProviderRequest, string, string][]): Promise<ProviderRequest[]> {
  const steps = requests.map(([req, sessionId, requestId]) => createStep(req, { sessionId, requestId }));
  const out = await lastValueFrom(from(steps).pipe(op, toArray()));
  return out.map((s) => s.value);
}

/** Run cases 3–8 with the reference's benchmark configuration (min artifact chars 1000). */
export async function runStructuralCases(vault: Vault, counter: TokenCounter): Promise<CaseResult[]> {
  const tokens = (v: unknown): number => counter.count(canonicalJson(v));
  const chars = (v: unknown): number => [...canonicalJson(v)].length;
  const pipeline = (): Op => (src) =>
    src.pipe(
      collapseDuplicates({ vault, counter, minArtifactChars: 1000 }),
      compileRequest({ vault, counter, minVaultChars: 1000 }),
    );
  const result = (name: string, raw: ProviderRequest, output: ProviderRequest, ref: number): CaseResult => ({
    name,
    rawChars: chars(raw),
    rawTokens: tokens(raw),
    outputChars: chars(output),
    outputTokens: tokens(output),
    referenceOutputTokens: ref,
    output,
  });
  const artifact = caseArtifact();
  const r3 = case3Request(artifact);
  const [, second] = await run(pipeline(), [
    [r3, 'benchmark', 'lease-1'],
    [r3, 'benchmark', 'lease-2'],
  ]);
  const r4 = case4Request(artifact);
  const [dup] = await run(pipeline(), [[r4, 'duplicate-benchmark', 'duplicate-1']]);
  const r5: ProviderRequest = { messages: [{ role: 'user', content: 'What is the next safe step?' }] };
  const [guard] = await run(pipeline(), [[r5, 'guard-benchmark', 'guard-1']]);
  const [, combined] = await run(pipeline(), [
    [r3, 'combined-benchmark', 'combined-1'],
    [r3, 'combined-benchmark', 'combined-2'],
  ]);
  const r7: ProviderRequest = { messages: [{ role: 'user', content: 'short question' }] };
  const [small] = await run(pipeline(), [[r7, 'small-benchmark', 'small-1']]);
  // Case 8 as the conversation reaches it: the request one turn earlier first, so the turns of the
  // measured request were shown before (an output is never rewritten before the model saw it).
  const r8 = case8Request();
  const earlier = { ...r8, messages: (r8['messages'] as unknown[]).slice(0, -4) };
  const [, compacted] = await run(pipeline(), [
    [earlier, 'conv-benchmark', 'conv-0'],
    [r8, 'conv-benchmark', 'conv-1'],
  ]);
  return [
    result('repeated_artifact_second_exposure', r3, second!, 164),
    result('same_request_duplicate_artifact', r4, dup!, 77_183),
    result('working_state_guard_no_bloat', r5, guard!, 21),
    result('receipt_plus_working_state_combined', r3, combined!, 257),
    result('small_request_fail_open', r7, small!, 17),
    result('context_compaction_multi_turn', r8, compacted!, 21_529),
  ];
}
