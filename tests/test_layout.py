"""The layout's rules, read from the source: who may import whom, and how big things get.

The data path reads one way: ``settings`` (what an operator sets) -> ``engine`` (the model's
facts, the vLLM door with the plan and its checks, backends, supervisor, replies) -> ``chat``
(everything that knows Chainlit) -> ``app.py``, and
``serve`` (the processes and the port: uvicorn, the workers, HAProxy) on top. The test
harness (``testing``) and the benchmark (``bench``) sit beside it: nothing in the app
imports them.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

import engine
from chat import open_app
from engine import ChatClient
from testing.servers import ROOT

PACKAGES = ("settings", "engine", "chat", "serve", "testing", "bench")
# What each package may not import, of the project's packages and the big frameworks.
FORBIDDEN = {
    "settings": {"engine", "chat", "serve", "testing", "bench", "chainlit", "vllm"},
    "engine": {"chat", "serve", "testing", "bench", "chainlit"},
    "chat": {"serve", "testing", "bench", "vllm"},
    "serve": {"testing", "bench", "tests"},
    "testing": {"bench", "tests"},
    "bench": {"tests"},
}
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60
MAX_APP_LINES = 60


def modules(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def imported(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports (absolute imports)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_import_downward_only(package: str) -> None:
    for path in modules(package):
        wrong = imported(path) & FORBIDDEN[package]
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


# Inside the engine, its three rooms sit below the rest: the model's facts, then the vLLM door
# (the machine as vLLM sees it, vLLM's failures and internals), then the plan (placement,
# batch, the checks before loading, capacity), then vLLM's arguments, backends, supervisor,
# replies.
ENGINE_ROOMS = {
    "engine.model": ("engine.vllm_door", "engine.plan"),
    "engine.vllm_door": ("engine.plan",),
    "engine.plan": (),
}
ENGINE_RUNTIME = {p.stem for p in (ROOT / "engine").glob("*.py")} - {"__init__", "__main__"}


def absolute_imports(path: Path) -> set[str]:
    """Every module ``path`` imports by its full dotted name."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


@pytest.mark.parametrize("room", sorted(ENGINE_ROOMS))
def test_the_engines_rooms_import_downward_only(room: str) -> None:
    above = {f"engine.{name}" for name in ENGINE_RUNTIME} | set(ENGINE_ROOMS[room])
    prefixes = tuple(f"{name}." for name in above)
    for path in modules(room.replace(".", "/")):
        imports = absolute_imports(path)
        wrong = {m for m in imports if m == "engine" or m in above or m.startswith(prefixes)}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


# chat/ from the top floor down: each may import only what stands below it (words and the
# errors the rooms share at the bottom; Chainlit's door beneath every room).
CHAT_FLOORS = (
    "chat", "chat.handlers", "chat.lifecycle", "chat.runtime", "chat.sharing", "chat.history",
    "chat.ui", "chat.routes", "chat.__main__", "chat.export", "chat.access", "chat.arrival",
    "chat.words",
    "chat.conversation", "chat.chainlit_door", "chat.metrics", "chat.counts", "chat.errors",
)  # fmt: skip


def chat_unit(module: str) -> str:
    """The room (``chat.ui``) or top-level module (``chat.export``) ``module`` is in."""
    return ".".join(module.split(".")[:2])


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def chat_imports(path: Path) -> set[str]:
    """The modules of chat/ that ``path`` imports, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            if node.module:
                found.add(".".join([*base, node.module]))
            else:
                found |= {".".join([*base, alias.name]) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chat"):
            found.add(str(node.module))
    return {name for name in found if name.startswith("chat")}


def test_chats_rooms_import_downward_only() -> None:
    units = {chat_unit(module_name(path)) for path in modules("chat")}
    assert units == set(CHAT_FLOORS), sorted(units ^ set(CHAT_FLOORS))
    for path in modules("chat"):
        unit = chat_unit(module_name(path))
        below = set(CHAT_FLOORS[CHAT_FLOORS.index(unit) + 1 :])
        wrong = {chat_unit(m) for m in chat_imports(path)} - below - {unit}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}: above it"


def test_deploy_is_gone() -> None:
    """Settings, the model's facts, the vLLM door and the strangers each found their package."""
    assert not (ROOT / "deploy").exists()


def test_no_test_imports_another_test() -> None:
    for path in modules("tests"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, path.relative_to(ROOT)
                assert not (node.module or "").startswith("tests"), path.relative_to(ROOT)


def test_modules_and_functions_stay_small() -> None:
    for path in [ROOT / "app.py", *modules(*PACKAGES, "scripts")]:
        source = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        assert len(source.splitlines()) <= MAX_MODULE_LINES, where
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                assert length <= MAX_FUNCTION_LINES, f"{where}: {node.name} ({length} lines)"
    assert len((ROOT / "app.py").read_text().splitlines()) <= MAX_APP_LINES


def test_every_exported_name_resolves() -> None:
    assert sorted(engine.__all__) == sorted(engine._MODULE_OF)  # type: ignore[attr-defined]
    for name in engine.__all__:
        assert getattr(engine, name) is not None


def test_unknown_names_raise_attribute_error() -> None:
    assert not hasattr(engine, "no_such_name")
    with pytest.raises(AttributeError):
        _ = engine.no_such_name  # type: ignore[attr-defined]


# vLLM's public API, which the app may use anywhere below chat/; every other vLLM module
# is an internal, touched only in engine/vllm_door/internals.py (one place to read on upgrade).
VLLM_PUBLIC = {
    "vllm",  # SamplingParams
    "vllm.config",  # VllmConfig (types only)
    "vllm.engine.arg_utils",  # AsyncEngineArgs
    "vllm.inputs",
    "vllm.outputs",
    "vllm.platforms",  # current_platform
    "vllm.sampling_params",
    "vllm.v1.engine.async_llm",  # AsyncLLM
    "vllm.v1.engine.exceptions",  # EngineDeadError, EngineGenerateError
}


def test_vllm_internals_are_touched_in_one_module() -> None:
    door = ROOT / "engine" / "vllm_door" / "internals.py"
    for path in modules("settings", "engine", "chat", "serve"):
        if path == door:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                module = node.module
                if module.split(".")[0] == "vllm":
                    assert module in VLLM_PUBLIC, f"{path.relative_to(ROOT)}: {module}"


def test_no_module_hands_state_through_globals() -> None:
    """The engine reaches the app through calls (docs/architecture.md), never a global."""
    for path in modules("settings", "engine", "chat", "serve"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            assert not isinstance(node, ast.Global), f"{path.relative_to(ROOT)}:{node.lineno}"


def test_chat_keeps_its_rooms() -> None:
    """chat/ holds its handlers and set-up at the top, the rest in rooms (ui, access, history)."""
    top = sorted(p.name for p in (ROOT / "chat").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 12, top
    assert {"ui", "access", "history"} <= {p.name for p in (ROOT / "chat").iterdir() if p.is_dir()}


def test_a_chats_state_is_one_typed_record() -> None:
    """No string key of Chainlit's user session outside ``chat.ui.state`` (``ChatState``)."""
    record = ROOT / "chat" / "ui" / "state.py"
    for path in [*modules("chat", "serve"), ROOT / "app.py"]:
        source = path.read_text(encoding="utf-8")
        used = [call for call in ("user_session.get(", "user_session.set(") if call in source]
        assert path == record or not used, f"{path.relative_to(ROOT)}: {used}: use chat_state()"


# What the app may import of Chainlit outside its door: the public ``cl`` API, the types
# and widgets it passes, the message class of an error, and the data layer it extends.
CHAINLIT_OUTSIDE = {
    "chainlit", "chainlit.types", "chainlit.input_widget", "chainlit.message",
    "chainlit.data.sql_alchemy",
}  # fmt: skip


def test_the_chainlit_door_is_an_allow_list() -> None:
    """Chainlit's config, server, sessions, context, emitter and sign-in tokens are read
    through ``chat.chainlit_door`` only."""
    door = ROOT / "chat" / "chainlit_door"
    for path in [*modules("chat", "serve"), ROOT / "app.py"]:
        if door in path.parents:
            continue
        chainlit = {m for m in absolute_imports(path) if m.split(".")[0] == "chainlit"}
        wrong = sorted(chainlit - CHAINLIT_OUTSIDE)
        source = path.read_text(encoding="utf-8")
        wrong += ["cl.context.emitter"] if "context.emitter" in source else []
        assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}: go through the door"


# Chainlit's, python-socketio's and python-engineio's internals the app touches, each only
# in chat/chainlit_door/ (one place to read on upgrade, as engine/vllm_door/internals.py).
CHAINLIT_INTERNALS = (
    "sio.handlers",
    "chat_contexts",
    "_authenticate_user",
    "eio.",
    "router.routes",
    "ws_sessions_id",
    "session.current_task",  # a chat session's task (asyncio.current_task is not it)
    "init_ws_context",
    "FILES_DIRECTORY",
    "config.code",
    "async_session",
    "clean_result",
    "wrap_user_function",
    "chainlit.auth.authenticate_user",
    "user_middleware[",
)


def test_chainlits_internals_are_touched_behind_one_door() -> None:
    door = ROOT / "chat" / "chainlit_door"
    for path in [*modules("chat", "serve"), ROOT / "app.py"]:
        if door in path.parents:
            continue
        source = path.read_text(encoding="utf-8")
        found = [name for name in CHAINLIT_INTERNALS if name in source]
        assert not found, f"{path.relative_to(ROOT)} touches {found}: go through chat.chainlit_door"


@pytest.mark.parametrize("package", ["chat", "serve"])
def test_the_engine_is_used_through_its_public_names(package: str) -> None:
    """``engine/__init__.py`` names what the packages above may use; its modules are its own."""
    for path in modules(package):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert not node.module.startswith("engine."), f"{path.relative_to(ROOT)}"


def module_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project's modules ``path`` imports when it loads (its top level, outside
    ``if TYPE_CHECKING:``), relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
            module = module if node.level else node.module or ""
            for alias in node.names:
                child = f"{module}.{alias.name}"
                found.add(child if child in known else module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return (found & known) - {name}


def test_no_module_imports_around_a_circle() -> None:
    """The app's modules load in one order: no import leads back to where it began."""
    paths = {}
    for path in modules("settings", "engine", "chat", "serve"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {name: module_imports(name, path, set(paths)) for name, path in paths.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        for target in graph[name]:
            assert target not in trail, " -> ".join([*trail[trail.index(target) :], target])
            if target not in done:
                visit(target, [*trail, target])
        done.add(name)

    for name in graph:
        visit(name, [name])


def test_the_launcher_builds_the_engine_and_the_web_app_takes_it() -> None:
    """One way to open the web app, on an engine and settings it is handed; the engine's
    protocol carries no settings and no attachment (the launcher's, not the chat's)."""
    assert list(inspect.signature(open_app).parameters) == [
        "engine",
        "settings",
        "replies",
        "worker",
    ]
    assert not {"settings", "attachment", "chats_at_once"} & set(dir(ChatClient))
