"""Chat Completions (`OpenAICompatibleModel`): the model, the projection of a request to its
body, the stream translator and the provider profiles."""
