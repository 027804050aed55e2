"""Small real tools for the framework's tests, as a module source (written into a tools
folder or a temporary distribution) and importable here: they search the real store."""

SOURCE = """
from kredenc.grounding.base import Evaluation
from kredenc.loop.answer import Citation
from kredenc.loop.tool import Tool, ToolResult
from kredenc.retrieve.query import search


class Decide(Tool):
    name = "decide"
    writes = ("decide.retrieve",)

    def run(self, mind, services):
        question = mind.read("ask.question")
        chit_chat = question.strip().lower().rstrip("!.") in ("hi", "hello", "thanks")
        mind.write("decide.retrieve", not chit_chat)
        return ToolResult(note="chit-chat" if chit_chat else "retrieve")


class Retrieve(Tool):
    name = "retrieve"
    writes = ("retrieve.chunks", "retrieve.mode")

    def run(self, mind, services):
        if mind.read("decide.retrieve", True) is False:
            return ToolResult(status="skipped", note="no retrieval needed")
        queries = [mind.read("ask.question")]
        focus = mind.read("reflect.focus", "")
        if focus:
            queries.append(focus)
        seen = {h.id: h for h in mind.read("retrieve.chunks", [])}
        for query in queries:
            for hit in search(services.store, services.ns, query, k=services.options["k"]):
                seen.setdefault(hit.id, hit)
        mind.write("retrieve.chunks", list(seen.values()))
        mind.write("retrieve.mode", "hybrid")
        mind.write("retrieve.queries", queries)
        return ToolResult(note=f"{len(seen)} chunks")


class Generate(Tool):
    name = "generate"
    writes = ("generate.text", "generate.citations")

    def run(self, mind, services):
        if mind.read("decide.retrieve", True) is False:
            mind.write("generate.text", "Hello!")
            mind.write("generate.citations", [])
            return ToolResult(note="greeting")
        chunks = mind.read("retrieve.chunks", None)
        if not chunks:
            return ToolResult(status="skipped", note="no chunks")
        wanted = [c for c in chunks if "needle" in c.text] or chunks
        best = wanted[0]
        on_delta = services.options.get("on_delta")
        if on_delta is not None:
            on_delta(best.text)
        mind.write("generate.text", best.text + " [1]")
        mind.write("generate.citations", [Citation(1, best.id, best.text, best.score)])
        return ToolResult(prompt_tokens=7, completion_tokens=3, cost_usd=0.001)


class Judge(Tool):
    name = "judge"
    writes = ("judge.evaluation",)

    def run(self, mind, services):
        text = mind.read("generate.text", None)
        if text is None:
            return ToolResult(status="skipped", note="no answer")
        found = "needle" in text
        mind.write(
            "judge.evaluation",
            Evaluation(found, 90 if found else 30, False, "", "checked"),
        )
        return ToolResult()


class Reflect(Tool):
    name = "reflect"
    writes = ("reflect.sufficient", "reflect.focus", "reflect.gaps")

    def run(self, mind, services):
        text = mind.read("generate.text", "")
        sufficient = "needle" in text or mind.read("decide.retrieve", True) is False
        mind.write("reflect.sufficient", sufficient)
        mind.write("reflect.completeness", 1.0 if sufficient else 0.2)
        mind.write("reflect.gaps", [] if sufficient else ["where is the needle"])
        mind.write("reflect.focus", "" if sufficient else "needle")
        return ToolResult()
"""

PIPELINE = ["decide", "retrieve", "generate", "judge", "reflect"]


def agent_file(name: str = "finder", tools: list[str] | None = None, **fields: object) -> str:
    """An agent's markdown: front matter from the arguments, then instructions."""
    lines = ["---", f"name: {name}", f"tools: [{', '.join(tools or PIPELINE)}]"]
    lines += [f"{key}: {value}" for key, value in fields.items()]
    lines += ["---", f"Instructions of {name}."]
    return "\n".join(lines) + "\n"
