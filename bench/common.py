"What the benches share: timing a call, and a median with its min-max."
import statistics, time

def timed(f):
    "(seconds, result) of calling `f`"
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out

def spread(xs:list, fmt:str='{:.1f}')->str:
    "The median of `xs` and their min-max, as 'median (min-max)'"
    return f'{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})'
