"""same_numbers.py -- two outputs of attnlab compared word by word: the same words, the same integers
(ranks, counts), real numbers within REL relative (default 1e-5: what the forward pass's order of
sums moves in six printed digits), or with REL "digit" at most one unit of their last printed digit
(the closest six printed digits can show: perplexities). Prints the first differences and the
largest relative gap; exit 1 if any difference is past the tolerance.

    python3 same_numbers.py A.txt B.txt [REL|digit]
"""
import re
import sys

NUM = re.compile(r'^\(?[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?%?[,;)]*$')


def num(w):
    w = w.lstrip('(').rstrip(',;%)')
    return (int(w), True) if re.fullmatch(r'[-+]?\d+', w) else (float(w), False)


def last_digit(w):
    """One unit of w's last printed digit."""
    m = NUM.match(w).group(1)
    e = NUM.match(w).group(2)
    frac = len(m.split('.')[1]) if '.' in m else 0
    return 10.0 ** (-frac + (int(e[1:]) if e else 0))


def main():
    a, b = (open(p).read().split('\n') for p in sys.argv[1:3])
    digit = len(sys.argv) > 3 and sys.argv[3] == 'digit'
    rel = 1e-5 if len(sys.argv) <= 3 or digit else float(sys.argv[3])
    bad, worst = [], 0.0
    if len(a) != len(b):
        bad.append('%d lines against %d' % (len(a), len(b)))
    for i, (la, lb) in enumerate(zip(a, b)):
        wa, wb = la.split(), lb.split()
        if len(wa) != len(wb):
            bad.append('line %d: %r / %r' % (i + 1, la, lb))
            continue
        for x, y in zip(wa, wb):
            if x == y:
                continue
            if not (NUM.match(x) and NUM.match(y)):
                bad.append('line %d: %r / %r' % (i + 1, x, y))
                continue
            (u, iu), (v, iv) = num(x), num(y)
            if iu and iv:
                bad.append('line %d: integer %s / %s' % (i + 1, x, y))
                continue
            g = abs(u - v) / max(abs(u), abs(v), 1e-30)
            worst = max(worst, g)
            if (abs(u - v) > 1.01 * max(last_digit(x), last_digit(y))) if digit else g > rel:
                bad.append('line %d: %s / %s (%.2g relative)' % (i + 1, x, y, g))
    print('largest relative gap %.3g; %d differences past %s' % (worst, len(bad), 'a last digit' if digit else rel))
    for m in bad[:5]:
        print(m)
    sys.exit(1 if bad else 0)


main()
