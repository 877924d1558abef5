/**
 * Child process for the lease race through the operator: opens the shared vault, waits at the
 * start barrier, runs collapseDuplicates over one request with its own request id and prints
 * `inline` or `receipt` for the large tool output.
 * Usage: dedupe-worker.ts <db> <session> <request-id> <goFile>
 */
import { writeSync } from 'node:fs';
import { firstValueFrom, of } from 'rxjs';
import { collapseDuplicates } from '../../operators/dedupe.js';
import { case3Request } from '../../src/compile/structural.js';
import { createStep } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { awaitGo } from '../fixtures/vault/barrier.js';

const [db = '', session = '', requestId = '', goFile = ''] = process.argv.slice(2);
const vault = await createVault({ path: db });
const request = case3Request('evidence line for the race\n'.repeat(400));
await awaitGo(goFile);
const out = await firstValueFrom(of(createStep(request, { sessionId: session, requestId })).pipe(collapseDuplicates({ vault, minArtifactChars: 1000 })));
const content = (out.value['messages'] as { content?: unknown }[])[3]!.content;
writeSync(1, `${content === (request['messages'] as { content?: unknown }[])[3]!.content ? 'inline' : 'receipt'}\n`);
await vault.close();
