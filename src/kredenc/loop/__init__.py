"""The answer loop: tools on a blackboard (the mind), run by the orchestrator."""
