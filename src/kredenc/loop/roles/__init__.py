"""The answer loop's roles, one :class:`~kredenc.loop.tool.Tool` each: decide,
rewrite, retrieve, grade, verify, generate, judge, reflect (shared helpers in
:mod:`kredenc.loop.roles.common`). Each has a deterministic implementation, the
default, and an LLM one chosen by its ``role_<name>`` setting."""
