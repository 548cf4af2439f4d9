"""Countdown: reach a target with arithmetic on given numbers, each used exactly once.

The task on which Qiu et al. (2025, arXiv:2509.24372) found ES far ahead of GRPO. Problems are
generated offline: the numbers are drawn, a random expression over all of them is built, and its
value (a positive integer) is the target, so every problem has a solution. The difficulty knob sets
how many numbers there are and how large they get; on the bundled SmolLM2-135M-Instruct only level 1
(two numbers up to 9) has a base pass@16 inside the 0.15-0.6 band ES experiments need (0.27 at T = 1,
32 tokens; level 2: 0.06; docs/es-options.md).

The reward parses the reply's expression with a small recursive-descent parser over exact
fractions (never Python `eval`): only integers, `+ - * /` (also `×`, `÷`) and parentheses; no unary
minus, no exponent, bounded length and nesting. The reply's answer is its last expression with an
operator (`= 37` and other bare numbers are skipped, so `(9 - 4) * 7 + 2 = 37` answers with its left
side); it scores 1.0 when it uses exactly the problem's numbers (as a multiset) and equals the target,
otherwise 0.0, as does a reply with no parsable expression. Only the last expression counts, so a
reply cannot collect the reward by listing many attempts. The reference is `"4,7,9=37"`.

That reward (`countdown`) never checks a result the reply states: `41 + 39 = 969` scores 1.0 for target 80. The
strict reward (`countdown-strict`, `countdown_strict_reward`) also requires every side of the answer's
'='-run to equal the target; the lenient one stays, by name, for the runs scored with it.

    >>> countdown_reward("(9 - 4) * 7 + 2 = 37", "2,4,7,9=37")
    1.0
    >>> countdown_reward("9 * 4 + 1", "2,4,7,9=37")
    0.0
    >>> countdown_reward("41 + 39 = 969", "39,41=80"), countdown_strict_reward("41 + 39 = 969", "39,41=80")
    (1.0, 0.0)
"""

from __future__ import annotations

import random
import re
from collections import Counter
from fractions import Fraction

from seedcast.evaluators.base import Problem
from seedcast.evaluators.generator import Generator

COUNTDOWN_INSTRUCTION = (
    "Reply with only an arithmetic expression that uses each number exactly once and equals the target."
)
# difficulty -> (how many numbers, largest number). Levels 7 and 8 came later: two numbers, like level 1, but
# enough distinct problems (1,947 and 7,043 against level 1's 251) to hold some out of training.
LEVELS: dict[int, tuple[int, int]] = {
    1: (2, 9),
    2: (3, 9),
    3: (3, 25),
    4: (4, 9),
    5: (4, 25),
    6: (5, 25),
    7: (2, 25),
    8: (2, 50),
}
MAX_TARGET = 1000
MAX_EXPRESSION_CHARS = 200  # longer runs are not answers to these problems; refuse before parsing
MAX_DEPTH = 32  # parentheses nested deeper than this are refused (no recursion blow-up)
_SYNONYMS = {"×": "*", "÷": "/"}
_EXPRESSION_RUN = re.compile(r"[0-9+\-*/×÷() .=]+")
_TOKEN = re.compile(r"\s*(?:(\d+)|([+\-*/×÷()]))")


class ExpressionError(ValueError):
    """Text that is not an expression this task accepts."""


def _apply(operator: str, left: Fraction, right: Fraction) -> Fraction:
    if operator == "+":
        return left + right
    if operator == "-":
        return left - right
    if operator == "*":
        return left * right
    if right == 0:
        raise ExpressionError("division by zero")
    return left / right


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match:
            raise ExpressionError(f"unexpected {text[position : position + 10]!r}")
        tokens.append(match.group(1) or _SYNONYMS.get(match.group(2), match.group(2)))
        position = match.end()
    return tokens


class _Parser:
    """expression := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*; factor := INT | '(' expression ')'"""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0
        self.numbers: list[int] = []

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            raise ExpressionError("the expression ends too early")
        self.position += 1
        return token

    def parse(self) -> Fraction:
        value = self._expression(0)
        if self._peek() is not None:
            raise ExpressionError(f"unexpected {self._peek()!r} after the expression")
        return value

    def _expression(self, depth: int) -> Fraction:
        value = self._term(depth)
        while self._peek() in ("+", "-"):
            value = _apply(self._take(), value, self._term(depth))
        return value

    def _term(self, depth: int) -> Fraction:
        value = self._factor(depth)
        while self._peek() in ("*", "/"):
            value = _apply(self._take(), value, self._factor(depth))
        return value

    def _factor(self, depth: int) -> Fraction:
        token = self._take()
        if token == "(":
            if depth >= MAX_DEPTH:
                raise ExpressionError(f"parentheses nested deeper than {MAX_DEPTH}")
            value = self._expression(depth + 1)
            if self._take() != ")":
                raise ExpressionError("unbalanced parentheses")
            return value
        if token.isdigit():
            self.numbers.append(int(token))
            return Fraction(int(token))
        raise ExpressionError(f"expected a number or '(', got {token!r}")


def evaluate_expression(text: str) -> tuple[Fraction, list[int]]:
    """The exact value of an expression and the numbers it uses, in order; ExpressionError otherwise."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"longer than {MAX_EXPRESSION_CHARS} characters")
    tokens = _tokens(text)
    if not tokens:
        raise ExpressionError("empty")
    parser = _Parser(tokens)
    return parser.parse(), parser.numbers


def parse_reference(reference: str) -> tuple[list[int], int] | None:
    """`"4,7,9=37"` -> ([4, 7, 9], 37); None when it is not of that form."""
    numbers, _, target = reference.partition("=")
    try:
        return [int(n) for n in numbers.split(",")], int(target)
    except ValueError:
        return None


def countdown_key(problem: Problem) -> str:
    """A problem up to the order of its numbers ("3, 7: make 21" is "7, 3: make 21"), by which held-out
    Countdown sets are kept disjoint from training problems and from themselves."""
    parsed = parse_reference(problem.reference)
    if parsed is None:
        return problem.prompt
    numbers, target = parsed
    return f"{','.join(map(str, sorted(numbers)))}={target}"


def answer_chain(completion: str) -> tuple[list[str], int] | None:
    """The '='-separated run that holds the reply's answer (`answer_expression`): its sides, in order, and the
    answer's index among them; None when the reply has no answer."""
    for run in reversed(_EXPRESSION_RUN.findall(completion)):
        sides = [side.strip(" .") for side in run.split("=")]
        for index in reversed(range(len(sides))):
            if not any(c.isdigit() for c in sides[index]):
                continue
            try:
                _, used = evaluate_expression(sides[index])
            except ExpressionError:
                continue
            if len(used) >= 2:
                return sides, index
    return None


def answer_expression(completion: str) -> tuple[str, Fraction, list[int]] | None:
    """The reply's answer: its last expression that parses and applies an operator (`answer_chain`), as (text,
    value, numbers used); None when it has none."""
    chain = answer_chain(completion)
    if chain is None:
        return None
    sides, index = chain
    return sides[index], *evaluate_expression(sides[index])


def final_expression(completion: str) -> tuple[Fraction, list[int]] | None:
    """The value and numbers of the reply's answer (`answer_expression`); None when it has none."""
    answer = answer_expression(completion)
    return None if answer is None else answer[1:]


def _countdown_score(completion: str, reference: str, strict: bool) -> float | None:
    """The lenient reward, or with `strict` the strict one (every side of the answer's '='-run must equal the
    target), from one parse of the reply; None when the reference is malformed."""
    parsed = parse_reference(reference)
    if parsed is None:
        return None
    numbers, target = parsed
    chain = answer_chain(completion)
    if chain is None:
        return 0.0
    sides, index = chain
    value, used = evaluate_expression(sides[index])
    if Counter(used) != Counter(numbers) or value != target:
        return 0.0
    for side in filter(None, sides) if strict else ():
        try:
            stated, _ = evaluate_expression(side)
        except ExpressionError:
            return 0.0
        if stated != target:
            return 0.0
    return 1.0


def countdown_reward(completion: str, reference: str) -> float | None:
    """1.0 if the reply's last expression uses exactly the numbers and equals the target, else 0.0; None when
    the reference is malformed."""
    return _countdown_score(completion, reference, strict=False)


def countdown_strict_reward(completion: str, reference: str) -> float | None:
    """`countdown_reward`, and every value the answer's '='-run states must equal the target too: `41 + 39 = 80`
    with target 80 scores 1.0, `41 + 39 = 969` scores 0.0 (the lenient reward checks the expression only, so a
    reply could state any result). A stated side that is no expression (`= eighty`) counts as wrong. None when
    the reference is malformed."""
    return _countdown_score(completion, reference, strict=True)


def stated_wrong_result(completion: str, reference: str) -> bool:
    """Whether the reply's answer expression is right but a result it states is not (what the strict reward
    refuses and the lenient one pays for): reward hacking, counted in the claims."""
    return countdown_reward(completion, reference) == 1.0 and countdown_strict_reward(completion, reference) == 0.0


def _random_solution(rng: random.Random, numbers: list[int]) -> tuple[str, Fraction]:
    """A random expression using every number once, and its value."""
    parts = [(str(n), Fraction(n)) for n in numbers]
    while len(parts) > 1:
        left = parts.pop(rng.randrange(len(parts)))
        right = parts.pop(rng.randrange(len(parts)))
        operator = rng.choice("+-*/")
        if operator == "/" and (right[1] == 0 or (left[1] / right[1]).denominator != 1):
            operator = rng.choice("+*")  # keep every intermediate value an integer, as people would
        if operator == "-" and left[1] < right[1]:
            left, right = right, left
        parts.append((f"({left[0]} {operator} {right[0]})", _apply(operator, left[1], right[1])))
    text, value = parts[0]
    return text[1:-1] if text.startswith("(") else text, value


def countdown_problems(count: int, difficulty: int = 1, seed: int = 0) -> list[Problem]:
    """`count` solvable problems of a difficulty level, a pure function of (count, difficulty, seed)."""
    if difficulty not in LEVELS:
        raise ValueError(f"countdown difficulty must be one of {sorted(LEVELS)}, got {difficulty}")
    how_many, largest = LEVELS[difficulty]
    rng = random.Random(f"seedcast-countdown:{difficulty}:{seed}")
    problems = []
    while len(problems) < count:
        numbers = [rng.randint(1, largest) for _ in range(how_many)]
        _, value = _random_solution(rng, numbers)
        if value.denominator != 1 or not 1 <= value <= MAX_TARGET:
            continue
        target = int(value)
        listed = ", ".join(map(str, numbers))
        problems.append(
            Problem(
                prompt=f"Using the numbers {listed}, make {target}. Use +, -, * and /, and each number exactly once.",
                reference=f"{','.join(map(str, numbers))}={target}",
                problem_id=f"countdown-{difficulty}-{seed}-{len(problems)}",
            )
        )
    return problems


COUNTDOWN_GENERATOR = Generator(problems=countdown_problems, levels=LEVELS, level_setting="countdown_difficulty")
