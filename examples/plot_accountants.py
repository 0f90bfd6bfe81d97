"""
================================================
A day of 100 tests: what each accountant charges
================================================

An analyst runs 100 private tests in a day, each at ε = 0.1, choosing the next one after
seeing the last. How much privacy has the day cost, at δ = 10⁻⁶?

* ``"basic"`` composition adds the ε: 10 after 100 tests.
* ``"zcdp"`` adds ρ = ε²/2 per test (any ε-DP release) and converts the sum: 5.22 after
  100 tests; ρ = ε + e^{−ε} − 1 for a release that is exactly one Laplace draw: 5.12.
* ``"rdp"`` adds Rényi divergences at one order fixed in advance.

These three are *filters*: a ledger using them checks each new spend against a fixed
target, which stays valid when each ε is chosen after the previous results. The
privacy-loss-distribution (PLD) composition reported by ``budget.report()`` is tighter
(4.77), but it holds only for the same 100 tests **declared in advance**, as a batch.

Nothing here touches data: the ledger only records spends.
"""

import matplotlib.pyplot as plt

from skdptest import BudgetExceededError, PrivacyBudget

EPSILON, DELTA, N_TESTS = 0.1, 1e-6, 100
checkpoints = list(range(10, N_TESTS + 1, 10))

# %%
# One ledger per profile; a report every 10 tests
# -----------------------------------------------
# The ledger's total is generous here (20): we want the composed cost of each prefix of
# the day, read from ``report()``, not a refusal.

curves = {}
for profile in ("pure", "laplace"):
    budget = PrivacyBudget(20.0, DELTA, accountant="zcdp")
    rows = []
    for i in range(1, N_TESTS + 1):
        budget.spend(EPSILON, label=f"test {i}", profile=profile)
        if i in checkpoints:
            rows.append(budget.report())
    curves[profile] = rows

last = curves["pure"][-1]
print(f"after {N_TESTS} tests at epsilon={EPSILON}, delta={DELTA:g}:")
print(f"  basic composition       {last.basic_epsilon:.2f}")
print(f"  zCDP (generic)          {last.zcdp_epsilon:.2f}")
print(f"  zCDP (Laplace profile)  {curves['laplace'][-1].zcdp_epsilon:.2f}")
print(f"  Renyi (batch)           {last.rdp_epsilon:.2f}")
print(f"  PLD (declared batch)    {last.batch_epsilon:.2f}")

# %%
# How many tests fit in a target of ε = 5.23?
# -------------------------------------------
# The adaptive guarantee is the ledger's target: basic composition stops at 52 tests,
# the zCDP filter admits all 100, the Rényi filter at its fixed order a few more.

for accountant in ("basic", "zcdp", "rdp"):
    budget = PrivacyBudget(5.23, DELTA, accountant=accountant)
    n = 0
    try:
        while n < 200:
            budget.spend(EPSILON)
            n += 1
    except BudgetExceededError:
        pass
    print(f"{accountant:>6}: {n} tests of epsilon={EPSILON} fit in (5.23, {DELTA:g})")

# %%
# The totals over the day
# -----------------------

fig, ax = plt.subplots(figsize=(6.4, 4.0))
ax.plot(checkpoints, [r.basic_epsilon for r in curves["pure"]], "k-", label="basic")
ax.plot(checkpoints, [r.zcdp_epsilon for r in curves["pure"]], "C0-", label="zCDP (generic)")
ax.plot(checkpoints, [r.zcdp_epsilon for r in curves["laplace"]], "C0--",
        label="zCDP (Laplace profile)")
ax.plot(checkpoints, [r.rdp_epsilon for r in curves["pure"]], "C1-", label="Rényi (batch)")
ax.plot(checkpoints, [r.batch_epsilon for r in curves["pure"]], "C2:",
        label="PLD (declared batch only)")
ax.set_xlabel("tests run (ε = 0.1 each)")
ax.set_ylabel("total ε at δ = 1e-6")
ax.set_title("One day of private tests, by accountant")
ax.legend()
fig.tight_layout()
plt.show()
