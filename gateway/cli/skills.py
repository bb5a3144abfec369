"""``talon skills list`` and ``talon skills approve PERSONA NAME``.

Approving a procedure draft (``<data_dir>/skills/drafts/<persona>/<name>/``, written by
``procedure_write``) checks its SKILL.md, moves the folder to
``<data_dir>/skills/approved/<persona>/<name>/`` and marks the procedure approved in the
database: from then on it is one of that persona's skills (persona.yaml stays the operator's).
The operator may edit the draft before approving it; what is approved is the file as it is.
"""

from __future__ import annotations

import argparse
import shutil
import time
from typing import Any

from gateway.cli.common import CommandError, read_database, settings_for

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "skills",
        parents=[common],
        help="skills and procedure drafts: list them, approve a draft",
        description="Skills are SKILL.md folders in skills/ beside talon.yaml or packaged, listed per persona "
        "in persona.yaml; procedures a persona saved with procedure_write are drafts until approved here.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("list", parents=[common], help="the skills, who may use them, and the procedures")
    ls.set_defaults(handler=cmd_list)
    ok = actions.add_parser(
        "approve", parents=[common], help="make a persona's procedure draft one of its skills"
    )
    ok.add_argument("persona", metavar="PERSONA", help="the persona that wrote it")
    ok.add_argument("name", metavar="NAME", help="the procedure's name (see `talon skills list`)")
    ok.set_defaults(handler=cmd_approve)


def cmd_list(args: argparse.Namespace) -> int:
    from gateway.personas import load_personas
    from gateway.skills import catalog, packaged_root
    from gateway.store.procedures import list_procedures

    settings = settings_for(args)
    personas = load_personas(settings)
    skills, _ = catalog(settings.config_dir)
    print(f"{'SKILL':<28} {'FROM':<9} {'MODE':<7} {'PERSONAS':<24} DESCRIPTION")
    for name, skill in sorted(skills.items()):
        source = "packaged" if skill.folder.parent == packaged_root() else "skills/"
        users = ", ".join(p for p, persona in personas.items() if name in persona.skills) or "-"
        print(f"{name:<28} {source:<9} {skill.mode:<7} {users:<24} {skill.description}")
    rows = _procedures(settings, list_procedures)
    print()
    if not rows:
        print("no procedures yet (a persona saves one with procedure_write)")
        return 0
    print(f"{'PERSONA':<16} {'PROCEDURE':<28} {'STATUS':<9} {'UPDATED':<16} DESCRIPTION")
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.updated_at))
        print(f"{r.persona:<16} {r.name:<28} {r.status:<9} {when:<16} {r.description}")
    return 0


def _procedures(settings: Any, fn: Any) -> list[Any]:
    from gateway.store.db import DB_FILE

    if not settings.database.url and not (settings.data_path / DB_FILE).is_file():
        return []
    return read_database(settings, lambda db: db.read(fn))


def cmd_approve(args: argparse.Namespace) -> int:
    from gateway.skills import SkillError, approved_dir, draft_dir, load_folder
    from gateway.store.procedures import approve_procedure, get_procedure

    settings = settings_for(args)
    row = read_database(settings, lambda db: db.read(get_procedure, args.persona, args.name))
    draft = draft_dir(settings.data_path, args.persona, args.name)
    if row is None:
        raise CommandError(
            f"{args.persona!r} has no procedure named {args.name!r}; `talon skills list` shows the procedures"
        )
    if row.status == "approved" and not draft.is_dir():
        print(f"{args.persona}/{args.name} is approved already")
        return 0
    if not draft.is_dir():
        raise CommandError(
            f"the draft folder {draft} is missing; ask the persona to write the procedure again"
        )
    try:
        skill = load_folder(draft)
    except SkillError as exc:
        raise CommandError(
            f"the draft cannot be approved: {exc}; fix {draft / 'SKILL.md'} and approve again"
        ) from None
    target = approved_dir(settings.data_path, args.persona, args.name)
    staging = target.with_name(f".{target.name}.approving")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(draft, staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    read_database(
        settings,
        lambda db: db.run_transaction(
            approve_procedure,
            args.persona,
            args.name,
            content=skill.body,
            description=skill.description,
            now=time.time(),
        ),
    )
    shutil.rmtree(draft)
    print(f"approved {args.persona}/{args.name}: the skill tool runs it from {target}")
    return 0
