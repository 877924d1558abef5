/**
 * `token-terminator/testing`: fast-check arbitraries and invariant properties for your own
 * pipelines and operators. fast-check is an optional peer dependency used only by this subpath.
 *
 * @example
 * import fc from 'fast-check';
 * import { assertInvariant, invariants, toolResultStream, withDeps } from 'token-terminator/testing';
 * await assertInvariant(invariants.recoversExactly(withDeps(({ vault }) => myOperator({ vault })), { vault, inputs: toolResultStream() }));
 */
export {
  OUTPUT_SHAPES,
  anyText,
  expandOutput,
  failingOutput,
  outputSpec,
  shapeForTool,
  toolOutput,
  verboseRun,
  type VerboseRun,
  type VerboseRunner,
  type OutputShape,
  type OutputSpec,
  type SizeClass,
  type ToolOutputOptions,
} from './arbitraries/text.js';
export {
  TOOL_NAMES,
  toolArgs,
  toolCall,
  toolCallStream,
  toolEventPair,
  toolResultStream,
  type ToolEventOptions,
  type ToolEventPair,
  type ToolStreamOptions,
} from './arbitraries/tools.js';
export {
  SKILL_TOOLS,
  renderSkillCatalog,
  skillCatalog,
  skillPrompt,
  type SkillCatalog,
  type SkillCatalogOptions,
  type SkillEntry,
} from './arbitraries/skills.js';
export {
  WIRE_FORMATS,
  anthropicRequest,
  chatRequest,
  conversation,
  formatRequest,
  growingSession,
  providerRequest,
  renderRequest,
  renderSession,
  requestStream,
  responsesRequest,
  type Conversation,
  type RequestOptions,
  type StreamOptions,
  type WireFormat,
} from './arbitraries/requests.js';
export { withSummary } from './arbitraries/summary.js';
export { conversationItems, promptSegments, requestFormat, roleProblems } from './format.js';
export { deepFreeze, firstDifference, sameData } from './deep.js';
export {
  InjectedFault,
  VAULT_METHODS,
  faultyVault,
  throwingCounter,
  throwingSpawn,
  type FaultLog,
  type FaultyVaultOptions,
  type VaultMethod,
} from './faults.js';
export { createResourceProbe, type LiveResource, type ResourceProbe } from './probe.js';
export {
  InvariantViolation,
  withDeps,
  type BuiltOperator,
  type DepsAwareOperator,
  type InvariantName,
  type InvariantOptions,
  type KitDeps,
  type OperatorFactory,
  type OperatorUnderTest,
} from './harness.js';
export { checkSmaller } from './properties/unchanged-or-smaller.js';
export { checkRecovery, readArtifact } from './properties/recovers-exactly.js';
export { faultPlan, type FailsOpenOptions, type FaultPlan } from './properties/fails-open.js';
export { cutPlan, type CutPlan, type ReleaseOptions } from './properties/releases-on-unsubscribe.js';
export { decisionsChanged, prefixBreak, type CacheStableOptions } from './properties/cache-stable.js';
export {
  actionsOf,
  danglingReferences,
  missingAction,
  missingDiagnostics,
  missingFailureLines,
  prefixChange,
  shownArtifacts,
} from './properties/fidelity.js';
export {
  assertInvariant,
  invariants,
  propertyTests,
  testInvariants,
  type PropTestApi,
  type PropTuple,
  type TestInvariantsOptions,
} from './invariants.js';
