"""The Gradio app by job: endpoints (JSON to one use case and back), layout (the tabs), server (limits, 404, MCP)."""
