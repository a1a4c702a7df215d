// The host's open elicitation questions, so a withdrawal from the engine aborts the signal the host's
// `onElicitation` was given. Questions and withdrawals reach JavaScript through two separate callback
// queues, so a withdrawal may arrive before its question (or a later question before an earlier one);
// ask ids are unique in the process but not contiguous per toolset, so order can't be inferred from them.

/** Withdrawals held for questions not asked yet, and ids of questions asked recently: each bounded. */
export const MAX_REMEMBERED_QUESTIONS = 1024;

export class OpenQuestions {
  private readonly open = new Map<number, AbortController>();
  /** Withdrawals that arrived before their question. */
  private readonly early = new Set<number>();
  /** Questions already asked (answered or open): a withdrawal of one of these is not early. */
  private readonly asked = new Set<number>();

  ask(askId: number): { signal: AbortSignal; done: () => void } {
    const controller = new AbortController();
    remember(this.asked, askId);
    if (this.early.delete(askId)) controller.abort();
    else this.open.set(askId, controller);
    return { signal: controller.signal, done: () => this.open.delete(askId) };
  }

  withdraw(askId: number): void {
    const controller = this.open.get(askId);
    if (controller) {
      this.open.delete(askId);
      controller.abort();
    } else if (!this.asked.has(askId)) {
      remember(this.early, askId);
    }
  }
}

/** Add to a set kept to the newest `MAX_REMEMBERED_QUESTIONS` (a Set iterates in insertion order). */
function remember(set: Set<number>, id: number): void {
  set.add(id);
  if (set.size > MAX_REMEMBERED_QUESTIONS) set.delete(set.values().next().value as number);
}
