def test_create_and_view(service, org):
    ns = {"owner_id": "22222222-2222-2222-2222-222222222222"}
    assert (
        service.run(org, {"command": "create", "path": "/memories/a.md", "file_text": "hi\n"}, ns)
        == "File created successfully at: /memories/a.md"
    )
    assert service.run(org, {"command": "view", "path": "/memories/a.md"}, ns) == (
        "Here's the content of /memories/a.md with line numbers:\n     1\thi\n     2\t"
    )
