"""tau2's ``mock`` domain: users and their tasks (agent side), a notification inbox (user side)."""

from __future__ import annotations

from typing import Any

from taubench_runner import records as r
from taubench_runner.toolkit import (
    TRANSFER_DESCRIPTION,
    TRANSFER_PARAM,
    ModelOut,
    Param,
    ToolKit,
    env_function,
    tool,
)

TaskStatus = r.Literal("pending", "completed")

Task = r.Model("Task", {
    "task_id": r.STR,
    "title": r.STR,
    "description": r.Field(r.Optional(r.STR), None),
    "status": TaskStatus,
})
User = r.Model("User", {"user_id": r.STR, "name": r.STR, "tasks": r.ListOf(r.STR)})
MockDB = r.Model("MockDB", {"tasks": r.DictOf(Task), "users": r.DictOf(User)}, forbid_extra=True)

Notification = r.Model("Notification", {
    "notification_id": r.STR,
    "message": r.STR,
    "status": r.Field(r.Literal("unread", "read"), "unread"),
    "task_id": r.Field(r.Optional(r.STR), None),
}, forbid_extra=True)
MockUserDB = r.Model("MockUserDB", {"notifications": r.Field(r.DictOf(Notification), default_factory=dict)},
                     forbid_extra=True)


class MockTools(ToolKit):
    """The agent's tools."""

    @classmethod
    def db_model(cls) -> r.Model:
        return MockDB

    @tool(
        "write", "Create a new task for a user.",
        Param("user_id", "string", "The ID of the user creating the task"),
        Param("title", "string", "The title of the task"),
        Param("description", "string", "Optional description of the task", default=None),
    )
    def create_task(self, user_id: Any, title: Any, description: Any = None) -> Any:
        if user_id not in self.db["users"]:
            raise ValueError(f"User {user_id} not found")
        task_id = f"task_{len(self.db['tasks']) + 1}"
        task = Task(task_id=task_id, title=title, description=description, status="pending")
        self.db["tasks"][task_id] = task
        self.db["users"][user_id]["tasks"].append(task_id)
        return ModelOut(task)

    @tool("read", "Get all users in the database.")
    def get_users(self) -> Any:
        return [ModelOut(user) for user in self.db["users"].values()]

    @tool(
        "write", "Update the status of a task.",
        Param("task_id", "string", "The ID of the task to update"),
        Param("status", "enum", "The new status of the task", enum=("pending", "completed")),
    )
    def update_task_status(self, task_id: Any, status: Any) -> Any:
        if task_id not in self.db["tasks"]:
            raise ValueError(f"Task {task_id} not found")
        task = self.db["tasks"][task_id]
        task["status"] = status  # pydantic does not validate assignments
        return ModelOut(task)

    @env_function
    def assert_number_of_tasks(self, user_id: Any, expected_number: Any) -> bool:
        if user_id not in self.db["users"]:
            raise ValueError(f"User {user_id} not found")
        return bool(len(self.db["users"][user_id]["tasks"]) == expected_number)

    @env_function
    def assert_task_status(self, task_id: Any, expected_status: Any) -> bool:
        if task_id not in self.db["tasks"]:
            raise ValueError(f"Task {task_id} not found")
        return bool(self.db["tasks"][task_id]["status"] == expected_status)

    @tool("generic", TRANSFER_DESCRIPTION, TRANSFER_PARAM)
    def transfer_to_human_agents(self, summary: Any) -> Any:
        return "Transfer successful"


class MockUserTools(ToolKit):
    """The user's tools: their notification inbox."""

    @classmethod
    def db_model(cls) -> r.Model:
        return MockUserDB

    @tool("read", "Check all notifications in the user's inbox.")
    def check_notifications(self) -> Any:
        return [ModelOut(n) for n in self.field("notifications").values()]

    @tool(
        "write", "Dismiss (mark as read) a notification.",
        Param("notification_id", "string", "The ID of the notification to dismiss."),
    )
    def dismiss_notification(self, notification_id: Any) -> Any:
        if notification_id not in self.field("notifications"):
            raise ValueError(f"Notification {notification_id} not found")
        self.field("notifications")[notification_id]["status"] = "read"
        return f"Notification {notification_id} dismissed"

    @env_function
    def add_notification(self, notification_id: Any, message: Any, task_id: Any = None) -> Any:
        notification = Notification(notification_id=notification_id, message=message, task_id=task_id)
        self.db["notifications"][notification_id] = notification
        return ModelOut(notification)

    @env_function
    def assert_notification_status(self, notification_id: Any, expected_status: Any) -> bool:
        if notification_id not in self.db["notifications"]:
            raise ValueError(f"Notification {notification_id} not found")
        return bool(self.db["notifications"][notification_id]["status"] == expected_status)


AGENT_TOOLS = MockTools
USER_TOOLS = MockUserTools
DB_FILE = "db.json"
USER_DB_FILE = "user_db.json"
