"""Statements of tenant boundaries: the stack quota, tree sizes, adopting and releasing stacks.

Where it sits: mixed into `Tx`, used by `operations` (a stack created, adopted
stacks taken over), `nested.children` (a child stack created or given a new
goal) and `nested.claims` (ownership of a stack named by an id from outside).

Two transaction-scoped advisory locks make the counts exact under concurrency:
one per project around "count the project's stacks, then insert one" (so
concurrent creates can never exceed the quota), one per stack tree around
"count the tree's resources, then store a child's goal". A transaction takes
the tree lock before any row lock and the project lock after it, so the two
never wait on each other in a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.engine.core.model import ResourceId, StackId
from services.engine.store.advisory import uuid_key

if TYPE_CHECKING:
    from services.engine.store.driver import Conn

#: Advisory lock classes ("CnvQ", "CnvT"); the object key is the project's hash or the root's id.
QUOTA_CLASS = 0x436E7651
TREE_CLASS = 0x436E7654


@dataclass(frozen=True)
class TreeCount:
    total: int  # resources of the whole tree (its stacks' goals)
    of_stack: int  # ... of the one stack asked about

    @property
    def others(self) -> int:
        """The tree's rows outside that stack."""
        return self.total - self.of_stack


@dataclass(frozen=True)
class Subtree:
    """A top-level stack and everything nested under it."""

    height: int  # 0: no nested stacks; 1: children only; ...
    resources: int  # resources of every stack's goal in it


class TenancyStatements:
    _c: Conn

    async def reserve_stack(self, project_id: str, quota: int) -> bool:
        """Whether the project may hold one more live stack (nested ones count). Holds the
        project's lock until the transaction ends, so the insert that follows is counted
        by every other creator of that project."""
        await self._c.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", QUOTA_CLASS, project_id)
        live: int = await self._c.fetchval(
            "SELECT count(*) FROM stacks WHERE project_id = $1 AND deleted_at IS NULL", project_id
        )
        return live < quota

    async def lock_tree(self, root: StackId) -> None:
        """Serialise changes to the size of the tree under `root` until the transaction ends."""
        await self._c.execute("SELECT pg_advisory_xact_lock($1, $2)", TREE_CLASS, uuid_key(root))

    async def set_goal_resources(self, stack_id: StackId, count: int) -> None:
        """The stack's new goal holds `count` resources (what its tree is counted by)."""
        await self._c.execute("UPDATE stacks SET goal_resources = $2 WHERE stack_id = $1", stack_id, count)

    async def tree_resources(self, root: StackId, *, stack_id: StackId | None = None) -> TreeCount:
        """Resources the goals of every live stack of the tree hold, and `stack_id`'s among them."""
        r = await self._c.fetchrow(
            """SELECT coalesce(sum(goal_resources), 0) AS total,
                      coalesce(sum(goal_resources) FILTER (WHERE stack_id = $2), 0) AS of_stack
               FROM stacks WHERE root_stack_id = $1 AND deleted_at IS NULL""",
            root,
            stack_id,
        )
        assert r is not None
        return TreeCount(r["total"], r["of_stack"])

    async def subtree(self, root: StackId) -> Subtree:
        """The size of the tree of the top-level stack `root`."""
        r = await self._c.fetchrow(
            """SELECT coalesce(max(nested_depth), 0) AS height, coalesce(sum(goal_resources), 0) AS resources
               FROM stacks WHERE root_stack_id = $1 AND deleted_at IS NULL""",
            root,
        )
        assert r is not None
        return Subtree(r["height"], r["resources"])

    async def adopt_stack(
        self, stack_id: StackId, *, owner: tuple[StackId, ResourceId], depth: int, root: StackId
    ) -> None:
        """Make the top-level stack `stack_id` the child of `owner` (stack, resource) at
        `depth`, moving its whole tree under `root`."""
        await self._c.execute(
            """UPDATE stacks SET root_stack_id = $4, nested_depth = nested_depth + $5,
                   owner_stack_id = CASE WHEN stack_id = $1 THEN $2 ELSE owner_stack_id END,
                   owner_resource_id = CASE WHEN stack_id = $1 THEN $3 ELSE owner_resource_id END,
                   owner_job_id = CASE WHEN stack_id = $1 THEN NULL ELSE owner_job_id END
               WHERE root_stack_id = $1 AND deleted_at IS NULL""",
            stack_id,
            owner[0],
            owner[1],
            root,
            depth,
        )

    async def release_stack(self, stack_id: StackId) -> None:
        """Let go of the child stack `stack_id`: no longer owned, a top-level stack of its
        project again, with its own tree under it."""
        await self._c.execute(
            """WITH RECURSIVE tree (stack_id) AS (
                   SELECT stack_id FROM stacks WHERE stack_id = $1
                   UNION ALL
                   SELECT s.stack_id FROM stacks s JOIN tree t ON s.owner_stack_id = t.stack_id
               ), top AS (SELECT nested_depth FROM stacks WHERE stack_id = $1)
               UPDATE stacks s SET root_stack_id = $1, nested_depth = s.nested_depth - top.nested_depth,
                   owner_stack_id = CASE WHEN s.stack_id = $1 THEN NULL ELSE s.owner_stack_id END,
                   owner_resource_id = CASE WHEN s.stack_id = $1 THEN NULL ELSE s.owner_resource_id END,
                   owner_job_id = CASE WHEN s.stack_id = $1 THEN NULL ELSE s.owner_job_id END
               FROM tree, top WHERE s.stack_id = tree.stack_id""",
            stack_id,
        )
