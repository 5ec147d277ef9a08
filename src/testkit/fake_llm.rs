//! A fake LLM server speaking Ollama's and OpenAI's wire formats (placeholder).
