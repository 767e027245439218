"""The learners' private rules and fast paths: what the modules of :mod:`purebandits.algorithms` are built on.

Nothing here is public API (import the learners from :mod:`purebandits.algorithms`); the names may change
with any release. A *rule* module holds the reference decision rule (the O(n) pass the paper describes, or
a building block several learners share); a *fast path* module makes the same decisions with less work per
pull (compiled whole-run drivers, incremental ask/tell workspaces), and the tests hold every fast path to
its rule bit for bit. Imports go one way: learner -> fast path -> rule (no module here imports a learner).

LUCB family (:mod:`~purebandits.algorithms.lucb`; :mod:`~purebandits.algorithms.at_lucb`; the forecast):

- ``lucb_rules`` (rule): the bound dispatcher, :func:`family_select` (the O(n) reference selection), the
  stop test, the round-dependent bounds' O(n) reference kernel and the round-free bounds' O(log n) kernel.
- ``lucb_driver`` (fast path): ``family_kernel``, the compiled whole-run entry point that picks the fastest
  kernel for a learner's bound.
- ``lucb_round_incremental`` (fast path): the compiled whole-run kernel of LUCB1 and KL-LUCB (window keys,
  classes of equal arms); AT-LUCB uses its class tables.
- ``lucb_incremental`` (fast path): the ask/tell workspace of the round-free bounds.
- ``lucb_round_asktell`` (fast path): the ask/tell workspace of LUCB1 and KL-LUCB.

CPE (:mod:`~purebandits.algorithms.cpe`: CLUCB, lil'CLUCB):

- ``cpe_rules`` (rule): the radii and the O(n) top-K reference kernel.
- ``cpe_incremental`` (fast path): the top-K kernel and ask/tell workspace without O(n) work per pull.

Other learners (their reference rule stays in the learner's own module):

- ``top_two_incremental`` (fast path of :mod:`~purebandits.algorithms.top_two`'s ``top_two_pick``).
- ``ucb1_incremental`` (fast path of :mod:`~purebandits.algorithms.ucb1`'s ``ucb1_pick``).
- ``ls_incremental`` (fast path of the LIL stop LS, :func:`purebandits.stopping.ls_stop_arm`): Nonadaptive + LS
  (:mod:`~purebandits.algorithms.uniform`), ExpGap + LS (:mod:`~purebandits.algorithms.elimination`), UCB1 + LS.

Shared:

- ``arm_classes`` (fast-path data structure): classes of equal arms, for ``lucb_round_incremental``,
  ``lucb_round_asktell``, ``cpe_incremental`` and AT-LUCB.
- ``rounds`` (rule): the round scheduler of the fixed-budget learners (``_RoundLearner``: uniform_allocation,
  successive_rejects, halving, optmai) and small helpers (``fewest_pulls``, ``first_from``, ``ranked``).
- ``kinf_stop`` (rule): the K_inf GLR stop (``stop="kinf"``) of Track-and-Stop, top-two and the LUCB family.
"""
