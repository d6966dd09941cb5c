"""OpenAI Responses (`OpenAIResponsesModel`): the model, the projection of a request to its
body, the stream translator and the replay format of opaque provider state."""
