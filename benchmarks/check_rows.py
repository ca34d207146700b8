"""The checks table of benchmarks/checkpoint_cycle.py and benchmarks/disk_bound.py: one row a check,
its figure, the reference it is held to and whether it holds ("-": a figure nothing holds it to)."""


class CheckRows:
    def __init__(self):
        self.rows = []

    def add(self, check, figure, reference, correct):
        """Appends a row; `correct` True, False or None (not judged)."""
        self.rows.append({"check": check, "figure": figure, "reference": reference, "correct": correct})

    def failed(self):
        """The checks that do not hold."""
        return [r["check"] for r in self.rows if r["correct"] is False]

    def print(self, title, figure_width, reference_width):
        """The '#' header, the fixed-width table and the footer naming what failed."""
        print(f"# {title}")
        print(f"{'check':<30}{'figure':>{figure_width}}  {'reference':<{reference_width}}{'correct':>8}")
        for r in self.rows:
            mark = "-" if r["correct"] is None else "yes" if r["correct"] else "NO"
            print(f"{r['check']:<30}{r['figure']:>{figure_width}}  {r['reference']:<{reference_width}}{mark:>8}")
        failed = self.failed()
        print(f"# {len(self.rows)} checks; " + ("all hold" if not failed else "FAILED: " + ", ".join(failed)))
