// The VS Code client: starts `sophon-dsl lsp` (stdio) for DSL plans, and for YAML/JSON
// files, which the server checks only when the project config's `plans` patterns name them.
"use strict";
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("sophon-dsl");
  const command = config.get("server.command") || ["sophon-dsl", "lsp"];
  const serverOptions = {
    command: command[0],
    args: command.slice(1),
    transport: TransportKind.stdio,
  };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "sophon" },
      { scheme: "file", language: "yaml" },
      { scheme: "file", language: "json" },
      { scheme: "file", language: "jsonc" },
    ],
    synchronize: {
      // tools files and the config: the server reloads them when they change on disk
      fileEvents: vscode.workspace.createFileSystemWatcher("**/{sophon.toml,pyproject.toml,*.py,*.yaml,*.yml,*.json}"),
    },
  };
  client = new LanguageClient("sophon-dsl", "sophon-dsl", serverOptions, clientOptions);
  context.subscriptions.push({ dispose: () => client && client.stop() });
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
