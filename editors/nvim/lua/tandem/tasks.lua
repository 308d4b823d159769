-- Keybinding tasks (issue 11): `:TandemTask [name]` runs a daemon task on
-- the selection or the current line with `tandem/runTask`; its answer
-- streams into the chat and an inline edit comes back through the review.
-- The daemon's code actions reach `vim.lsp.buf.code_action()` on their own
-- (the client is attached; `tandem.runTask` is an executeCommand).
local chat = require('tandem.chat')
local client = require('tandem.client')
local config = require('tandem.config')

local M = {}

--- The buffer's diagnostics (any source) on lines `line1`..`line2`, as
--- LSP diagnostics: what `fix` works from.
function M.diagnostics(buf, line1, line2)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local last = d.end_lnum or d.lnum
    if d.lnum <= line2 - 1 and last >= line1 - 1 then
      table.insert(out, {
        range = {
          start = { line = d.lnum, character = d.col or 0 },
          ['end'] = { line = last, character = d.end_col or d.col or 0 },
        },
        message = d.message,
        severity = d.severity,
        source = d.source,
        code = d.code,
      })
    end
  end
  return out
end

--- Runs task `name` on lines `line1`..`line2` (1-based) of `buf`.
--- `instruction` is passed on when given (the `edit` task asks otherwise).
function M.run(name, buf, line1, line2, instruction, on_done)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  client.attach(buf)
  local last = vim.api.nvim_buf_get_lines(buf, line2 - 1, line2, false)[1] or ''
  local params = {
    task = name,
    textDocument = {
      uri = vim.uri_from_bufnr(buf),
      version = vim.lsp.util.buf_versions[buf],
    },
    range = {
      start = { line = line1 - 1, character = 0 },
      ['end'] = { line = line2 - 1, character = #last },
    },
    instruction = instruction,
    diagnostics = M.diagnostics(buf, line1, line2),
  }
  chat.show(false)
  client.request('tandem/runTask', params, function(err, result)
    if err then
      vim.notify('tandem: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif result and result.edit and result.edit.outcome == 'refused' then
      -- e.g. the selection was edited meanwhile: say why nothing changed.
      vim.notify('tandem: ' .. result.edit.message, vim.log.levels.WARN)
    end
    vim.api.nvim_exec_autocmds('User', {
      pattern = 'TandemTaskDone',
      modeline = false,
      data = { task = name, error = err, result = result },
    })
    if on_done then
      on_done(err, result)
    end
  end)
end

--- Asks which task to run (vim.ui.select over the configured ones).
function M.pick(buf, line1, line2)
  vim.ui.select(config.current.tasks, { prompt = 'tandem task', kind = 'tandem.task' }, function(name)
    if name then
      M.run(name, buf, line1, line2)
    end
  end)
end

--- The `edit` task with an instruction asked first.
function M.edit(buf, line1, line2)
  vim.ui.input({ prompt = 'tandem: edit the selection to… ' }, function(instruction)
    if instruction and instruction ~= '' then
      M.run('edit', buf, line1, line2, instruction)
    end
  end)
end

--- Completion of `:TandemTask`.
function M.complete(lead)
  local names = vim.tbl_filter(function(name)
    return vim.startswith(name, lead)
  end, config.current.tasks)
  table.sort(names)
  return names
end

return M
