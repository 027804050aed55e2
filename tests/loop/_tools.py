"""Small real tools for the framework's tests (``_finder.py``), as source to write into a
tools folder or a temporary distribution, and agent files that list them."""

from pathlib import Path

SOURCE = Path(__file__).with_name("_finder.py").read_text(encoding="utf-8")


PIPELINE = ["decide", "retrieve", "generate", "judge", "reflect"]


def agent_file(name: str = "finder", tools: list[str] | None = None, **fields: object) -> str:
    """An agent's markdown: front matter from the arguments, then instructions."""
    lines = ["---", f"name: {name}", f"tools: [{', '.join(tools or PIPELINE)}]"]
    lines += [f"{key}: {value}" for key, value in fields.items()]
    lines += ["---", f"Instructions of {name}."]
    return "\n".join(lines) + "\n"
