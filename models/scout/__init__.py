"""ltu.scout: active information foraging over long text with a decoupled epistemic state
(SCOUT, ICML 2026; see ``agent`` for the loop and ``protocol`` for the policy interface)."""
