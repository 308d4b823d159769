-- `:TandemRewind`: pick one of the chat session's messages
-- (vim.ui.select), see what a rewind to before it would do to the files
-- (a dry run: restored, conflicts with their diffs, unrestorable), then
-- choose what to rewind: files and conversation, files, or conversation.
-- When files the user changed since are in the way (their diffs are in the
-- summary), a last choice leaves them alone or overwrites them (`force`
-- for those paths).
local client = require('tandem.client')

local M = {}

local CHOICES = {
  { label = 'Files and conversation', files = true, conversation = true },
  { label = 'Files only', files = true, conversation = false },
  { label = 'Conversation only', files = false, conversation = true },
}

--- The summary of a `tandem/rewind` result, for people.
function M.summary(result, title)
  local lines = { title }
  local files = result.files or {}
  if #files == 0 then
    table.insert(lines, 'no file to restore')
  end
  for _, file in ipairs(files) do
    local line = '  ' .. vim.fn.fnamemodify(file.path, ':.') .. ': ' .. file.status
    if file.reason then
      line = line .. ' (' .. file.reason .. ')'
    end
    table.insert(lines, line)
    if file.diff then
      for _, d in ipairs(vim.split(file.diff, '\n', { plain = true, trimempty = true })) do
        table.insert(lines, '    ' .. d)
      end
    end
  end
  return lines
end

local function show(lines)
  local buf = vim.fn.bufnr('tandem://rewind')
  if buf == -1 then
    vim.cmd('botright new')
    buf = vim.api.nvim_get_current_buf()
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'wipe'
    vim.api.nvim_buf_set_name(buf, 'tandem://rewind')
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
end

local function report(err)
  vim.schedule(function()
    vim.notify('tandem: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
  end)
end

--- The choices for conflicting files: leave them, overwrite all, or
--- (with more than one) overwrite just one. Each has the `force` to send.
function M.force_choices(conflicts)
  local paths = vim.tbl_map(function(f)
    return f.path
  end, conflicts)
  local choices = {
    { label = 'Leave the ' .. #paths .. ' file(s) you changed alone', force = nil },
    { label = 'Overwrite them too (your changes are lost)', force = paths },
  }
  if #paths > 1 then
    for _, path in ipairs(paths) do
      table.insert(choices, { label = 'Overwrite only ' .. vim.fn.fnamemodify(path, ':.'), force = { path } })
    end
  end
  return choices
end

local function run(id, message, choice, preview, force)
  local params = {
    sessionId = id,
    toMessageId = message.id,
    files = choice.files,
    conversation = choice.conversation,
    force = force,
  }
  client.request('tandem/rewind', params, function(err, result)
    if err then
      return report(err)
    end
    vim.schedule(function()
      local lines = M.summary(result, 'Rewound to before "' .. message.text .. '" (' .. (result.rewindId or '') .. ')')
      vim.list_extend(lines, { '', 'Before:' })
      vim.list_extend(lines, preview)
      show(lines)
      if choice.conversation then
        require('tandem.chat').append('\n_The conversation now continues from before "' .. message.text .. '"._\n')
      end
      vim.api.nvim_exec_autocmds('User', { pattern = 'TandemRewound', modeline = false, data = result })
    end)
  end)
end

--- `:TandemRewind`.
function M.pick()
  local id = require('tandem.session').id()
  local messages = id and require('tandem.updates').messages[id] or {}
  if #messages == 0 then
    return vim.notify('tandem: no message to rewind to in this chat', vim.log.levels.INFO)
  end
  vim.ui.select(messages, {
    prompt = 'Rewind to before which message?',
    kind = 'tandem.rewind.message',
    format_item = function(m)
      return m.text
    end,
  }, function(message)
    if not message then
      return
    end
    local dry = { sessionId = id, toMessageId = message.id, files = true, conversation = true, dryRun = true }
    client.request('tandem/rewind', dry, function(err, result)
      if err then
        return report(err)
      end
      vim.schedule(function()
        local preview = M.summary(result, 'A rewind to before "' .. message.text .. '" would:')
        show(preview)
        vim.ui.select(CHOICES, {
          prompt = 'Rewind what?',
          kind = 'tandem.rewind.what',
          format_item = function(c)
            return c.label
          end,
        }, function(choice)
          if not choice then
            return
          end
          local conflicts = vim.tbl_filter(function(f)
            return f.status == 'conflict'
          end, result.files or {})
          if not choice.files or #conflicts == 0 then
            return run(id, message, choice, preview)
          end
          vim.ui.select(M.force_choices(conflicts), {
            prompt = #conflicts .. ' file(s) changed since (diffs above): overwrite them?',
            kind = 'tandem.rewind.force',
            format_item = function(c)
              return c.label
            end,
          }, function(force)
            if force then
              run(id, message, choice, preview, force.force)
            end
          end)
        end)
      end)
    end)
  end)
end

return M
