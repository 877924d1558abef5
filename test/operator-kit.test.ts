import { firstValueFrom, map, of, Subject, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { stepOperator } from '../src/operator-kit.js';
import { advance, createStep, type Step } from '../src/step.js';

const ctx = { sessionId: 's' };
const step = (v: string): Step<string> => createStep(v, ctx);
const upper = () =>
  stepOperator<string>(
    'upper',
    () => (s) => advance(s, s.value.toUpperCase(), { stage: 'upper', kind: 'applied', reason: 'test' }),
  );

describe('stepOperator', () => {
  it('keeps order even when later reductions finish first', async () => {
    const delays: Record<string, number> = { a: 30, b: 1, c: 10 };
    const op = stepOperator<string>('slow', () => async (s) => {
      await new Promise((r) => setTimeout(r, delays[s.value]));
      return advance(s, s.value + '!', { stage: 'slow', kind: 'applied', reason: 'test' });
    });
    const out = await firstValueFrom(of(step('a'), step('b'), step('c')).pipe(op, toArray()));
    expect(out.map((s) => s.value)).toEqual(['a!', 'b!', 'c!']);
  });

  it('passes the original through with a failed_open decision when the reducer throws', async () => {
    const boom = stepOperator<string>('boom', () => () => {
      throw new TypeError('bad');
    });
    const rejects = stepOperator<string>('rejects', () => () => Promise.reject(new RangeError('bad')));
    const [a, b] = await firstValueFrom(of(step('x'), step('y')).pipe(boom, rejects, toArray()));
    expect(a!.value).toBe('x');
    expect(a!.decisions.map((d) => [d.stage, d.kind, d.error])).toEqual([
      ['boom', 'failed_open', 'TypeError'],
      ['rejects', 'failed_open', 'RangeError'],
    ]);
    expect(b!.value).toBe('y');
  });

  it('emits synchronous reductions in marble order', () => {
    const scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
    scheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const source = cold('a-b--c|', { a: step('a'), b: step('b'), c: step('c') });
      const values = source.pipe(upper());
      const mapped = { a: 'A', b: 'B', c: 'C' };
      expectObservable(values.pipe(map((s) => s.value))).toBe('a-b--c|', mapped);
      expectSubscriptions(source.subscriptions).toBe('^-----!');
    });
  });

  it('aborts the in-flight reduction when the subscriber unsubscribes', async () => {
    let aborted = false;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const op = stepOperator<string>('hang', () => (s, signal) => {
      started();
      return new Promise<Step<string>>((resolve) => {
        signal.addEventListener('abort', () => {
          aborted = true;
          resolve(s);
        });
      });
    });
    const subject = new Subject<Step<string>>();
    const seen: string[] = [];
    const sub = subject.pipe(op).subscribe((s) => seen.push(s.value));
    subject.next(step('x'));
    await running;
    sub.unsubscribe();
    await new Promise((r) => setTimeout(r, 5));
    expect(aborted).toBe(true);
    expect(seen).toEqual([]);
  });

  it('does not abort a reduction that already settled (nothing is left to release)', async () => {
    const signals: AbortSignal[] = [];
    const op = stepOperator<string>('settles', () => async (s, signal) => {
      signals.push(signal);
      await Promise.resolve();
      return advance(s, s.value + '!', { stage: 'settles', kind: 'applied', reason: 'test' });
    });
    const subject = new Subject<Step<string>>();
    const seen: string[] = [];
    const sub = subject.pipe(op).subscribe((s) => seen.push(s.value));
    subject.next(step('a'));
    subject.next(step('b'));
    await new Promise((r) => setTimeout(r, 0));
    sub.unsubscribe();
    expect(seen).toEqual(['a!', 'b!']);
    expect(signals.map((s) => s.aborted)).toEqual([false, false]);
  });

  it('gives each subscription its own state', async () => {
    const op = stepOperator<string>('count', () => {
      let n = 0;
      return (s) => advance(s, `${s.value}${++n}`, { stage: 'count', kind: 'applied', reason: 'test' });
    });
    const source = of(step('a'), step('b'));
    const first = await firstValueFrom(source.pipe(op, toArray()));
    const second = await firstValueFrom(source.pipe(op, toArray()));
    expect(first.map((s) => s.value)).toEqual(['a1', 'b2']);
    expect(second.map((s) => s.value)).toEqual(['a1', 'b2']);
  });

  it('passes a step whose own signal is already aborted through unchanged', async () => {
    const controller = new AbortController();
    controller.abort();
    const out = await firstValueFrom(of(createStep('q', ctx, controller.signal)).pipe(upper()));
    expect(out.value).toBe('q');
  });
});

describe('stepOperator listeners', () => {
  it('removes its abort listener from the step signal after a synchronous reduction', async () => {
    const controller = new AbortController();
    let added = 0;
    let removed = 0;
    const signal = controller.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = ((...args: Parameters<AbortSignal['addEventListener']>) => {
      added++;
      add(...args);
    }) as AbortSignal['addEventListener'];
    signal.removeEventListener = ((...args: Parameters<AbortSignal['removeEventListener']>) => {
      removed++;
      remove(...args);
    }) as AbortSignal['removeEventListener'];
    await firstValueFrom(of(createStep('q', ctx, signal), createStep('r', ctx, signal)).pipe(upper(), toArray()));
    expect(added).toBe(2);
    expect(removed).toBe(2);
  });
});
