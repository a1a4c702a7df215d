// The open elicitation questions of a toolset (lib/questions.ts): the engine's withdrawals and questions reach
// JavaScript through two callback queues, so every arrival order must end with the right signals aborted.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OpenQuestions, MAX_REMEMBERED_QUESTIONS } from '../dist/questions.js';

test('a withdrawal aborts its open question, and only it', () => {
  const questions = new OpenQuestions();
  const a = questions.ask(1);
  const b = questions.ask(2);
  questions.withdraw(1);
  assert.equal(a.signal.aborted, true);
  assert.equal(b.signal.aborted, false);
});

test('a withdrawal that arrives before its question aborts it when it is asked', () => {
  const questions = new OpenQuestions();
  questions.withdraw(5);
  assert.equal(questions.ask(5).signal.aborted, true);
});

test('a later question arriving first does not make an earlier question\'s withdrawal look stale', () => {
  // Ask ids are process-wide: this toolset may see 9 before 4 (and never 5–8, which belong to others).
  const questions = new OpenQuestions();
  const later = questions.ask(9);
  questions.withdraw(4);
  const earlier = questions.ask(4);
  assert.equal(earlier.signal.aborted, true, 'the withdrawal of 4 was kept until 4 was asked');
  assert.equal(later.signal.aborted, false);
});

test('a withdrawal of an answered question is ignored; remembered ids stay bounded', () => {
  const questions = new OpenQuestions();
  const answered = questions.ask(3);
  answered.done();
  questions.withdraw(3);
  assert.equal(answered.signal.aborted, false);
  for (let id = 10_000; id < 10_000 + 3 * MAX_REMEMBERED_QUESTIONS; id++) questions.withdraw(id);
  const recent = 10_000 + 3 * MAX_REMEMBERED_QUESTIONS - 1;
  assert.equal(questions.ask(recent).signal.aborted, true, 'the newest early withdrawals are kept');
  assert.equal(questions.ask(10_000).signal.aborted, false, 'the oldest were let go (bounded)');
});
