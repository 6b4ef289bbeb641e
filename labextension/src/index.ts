/**
 * pallaslab's JupyterLab extension: what only JupyterLab can do well, on top
 * of the inspector widget (which needs none of this to render).
 *
 * - `pallaslab:plugin`: settings, and "Open in new tab" for the inspector's texts;
 * - `pallaslab:languages`: MLIR, LLVM IR, PTX, SASS, TPU LLO, HLO and jaxpr for CodeMirror 6;
 * - `pallaslab:templates`: new notebooks and cells from kernel templates;
 * - `pallaslab:saved-output`: static inspectors in saved notebooks.
 */

import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, showErrorMessage } from '@jupyterlab/apputils';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker } from '@jupyterlab/notebook';
import { Contents } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { SavedOutputFallback } from './fallback';
import { pallaslabIcon } from './icons';
import { LANGUAGE_INFO, registerLanguages } from './languages';
import { parseOpenTextRequest } from './linemap';
import { OPEN_TEXT_EVENT, TextViews } from './opentext';
import {
  cellsToInsert,
  cellText,
  freeName,
  notebookOf,
  templateById,
  TEMPLATES
} from './templates';

/** Command ids. */
export namespace CommandIDs {
  export const openText = 'pallaslab:open-text';
  export const openSettings = 'pallaslab:open-settings';
  export const newNotebook = 'pallaslab:new-notebook';
  export const insertTemplate = 'pallaslab:insert-template';
}

const PALETTE_CATEGORY = 'pallaslab';

declare global {
  // eslint-disable-next-line @typescript-eslint/naming-convention
  interface Window {
    /** Tells the inspector that JupyterLab can open its texts in tabs. */
    __pallaslabLab?: boolean;
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'pallaslab:plugin',
  description: 'pallaslab settings, and the inspector texts in their own tabs.',
  autoStart: true,
  optional: [ILabShell, INotebookTracker, ISettingRegistry, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell | null,
    notebooks: INotebookTracker | null,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null
  ) => {
    const views = new TextViews(app, notebooks);
    app.commands.addCommand(CommandIDs.openText, {
      label: 'Open pallaslab Text in a New Tab',
      describedBy: {
        args: {
          type: 'object',
          properties: {
            title: { type: 'string' },
            language: { type: 'string' },
            text: { type: 'string' },
            sourceMap: { type: 'array' },
            sources: { type: 'array' }
          },
          required: ['text']
        }
      },
      execute: args => views.open(parseOpenTextRequest(args), null)
    });
    app.commands.addCommand(CommandIDs.openSettings, {
      label: 'pallaslab Settings',
      caption: 'Default IR target, TPU generation and interpret mode',
      icon: pallaslabIcon,
      execute: () =>
        app.commands.execute('settingeditor:open', { query: 'pallaslab' })
    });
    palette?.addItem({
      command: CommandIDs.openSettings,
      category: PALETTE_CATEGORY
    });

    // Side-by-side tabs are JupyterLab's: Notebook 7 keeps one document per page.
    if (labShell) {
      window.__pallaslabLab = true;
      document.addEventListener(OPEN_TEXT_EVENT, (event: Event) => {
        const origin = event.composedPath()[0];
        try {
          const request = parseOpenTextRequest((event as CustomEvent).detail);
          views.open(request, origin instanceof Node ? origin : null);
        } catch (error) {
          void showErrorMessage(
            'pallaslab could not open this text',
            String(error)
          );
        }
      });
    }

    // The settings are the kernel's to read (pallaslab/_src/settings.py); loading them
    // here validates the user's file against the schema and reports a broken one.
    if (settingRegistry) {
      settingRegistry.load(plugin.id).catch(reason => {
        console.error('pallaslab: could not load settings', reason);
      });
    }
  }
};

const languages: JupyterFrontEndPlugin<void> = {
  id: 'pallaslab:languages',
  description:
    'MLIR, LLVM IR, PTX, SASS, TPU LLO, HLO and jaxpr highlighting for CodeMirror.',
  autoStart: true,
  requires: [IEditorLanguageRegistry],
  activate: (app: JupyterFrontEnd, registry: IEditorLanguageRegistry) => {
    registerLanguages(registry);
    for (const [name, info] of Object.entries(LANGUAGE_INFO)) {
      if (!info.extensions.length) {
        continue;
      }
      app.docRegistry.addFileType({
        name: `pallaslab-${name}`,
        displayName: info.displayName,
        extensions: info.extensions.map(extension => `.${extension}`),
        mimeTypes: [info.mime],
        fileFormat: 'text',
        contentType: 'file',
        icon: pallaslabIcon
      });
    }
  }
};

const templates: JupyterFrontEndPlugin<void> = {
  id: 'pallaslab:templates',
  description: 'New notebooks and cells from pallaslab kernel templates.',
  autoStart: true,
  optional: [ILauncher, ICommandPalette, INotebookTracker, IDefaultFileBrowser],
  activate: (
    app: JupyterFrontEnd,
    launcher: ILauncher | null,
    palette: ICommandPalette | null,
    notebooks: INotebookTracker | null,
    browser: IDefaultFileBrowser | null
  ) => {
    const { commands, serviceManager } = app;
    const titleOf = (args: { template?: unknown }) => {
      try {
        return templateById(String(args.template)).title;
      } catch {
        return 'pallaslab template';
      }
    };

    commands.addCommand(CommandIDs.newNotebook, {
      label: args =>
        args.isLauncher ? titleOf(args) : `New Notebook: ${titleOf(args)}`,
      caption: args => {
        try {
          return templateById(String(args.template)).caption;
        } catch {
          return 'A new notebook from a pallaslab kernel template';
        }
      },
      icon: args => (args.isPalette ? undefined : pallaslabIcon),
      execute: async args => {
        const template = templateById(String(args.template));
        const cwd =
          typeof args.cwd === 'string' ? args.cwd : (browser?.model.path ?? '');
        const listing = await serviceManager.contents.get(cwd, {
          content: true
        });
        const taken = new Set(
          ((listing.content ?? []) as Contents.IModel[]).map(item => item.name)
        );
        const name = freeName(template, taken);
        const path = cwd ? `${cwd}/${name}` : name;
        const specs = serviceManager.kernelspecs.specs;
        const kernelName = specs?.default ?? '';
        const spec = specs?.kernelspecs[kernelName];
        const kernelspec = spec
          ? {
              name: kernelName,
              display_name: spec.display_name,
              language: spec.language
            }
          : null;
        await serviceManager.contents.save(path, {
          type: 'notebook',
          format: 'json',
          content: notebookOf(template, kernelspec)
        });
        return commands.execute('docmanager:open', {
          path,
          factory: 'Notebook'
        });
      }
    });

    commands.addCommand(CommandIDs.insertTemplate, {
      label: args => `Insert Kernel Cell: ${titleOf(args)}`,
      caption: 'Insert the template kernel cell below the active cell',
      isEnabled: () => !!notebooks?.currentWidget?.content.model,
      execute: args => {
        const template = templateById(String(args.template));
        const notebook = notebooks?.currentWidget?.content;
        const model = notebook?.model;
        if (!notebook || !model) {
          throw new Error(
            'open a notebook to insert a pallaslab template into'
          );
        }
        const existing = Array.from(model.sharedModel.cells, cell =>
          cell.getSource()
        );
        const cells = cellsToInsert(template, existing);
        const at = existing.length ? notebook.activeCellIndex + 1 : 0;
        model.sharedModel.insertCells(
          at,
          cells.map(cell => ({
            cell_type: cell.cell_type,
            source: cellText(cell),
            metadata: {}
          }))
        );
        notebook.activeCellIndex = at + cells.length - 1;
      }
    });

    TEMPLATES.forEach((template, rank) => {
      launcher?.add({
        command: CommandIDs.newNotebook,
        args: { template: template.id, isLauncher: true },
        category: 'pallaslab',
        rank
      });
      palette?.addItem({
        command: CommandIDs.newNotebook,
        args: { template: template.id, isPalette: true },
        category: PALETTE_CATEGORY,
        rank
      });
      palette?.addItem({
        command: CommandIDs.insertTemplate,
        args: { template: template.id },
        category: PALETTE_CATEGORY,
        rank: rank + TEMPLATES.length
      });
    });
  }
};

const savedOutput: JupyterFrontEndPlugin<void> = {
  id: 'pallaslab:saved-output',
  description:
    'Shows the static inspector in saved notebooks whose widgets are gone.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, notebooks: INotebookTracker) => {
    notebooks.forEach(panel => new SavedOutputFallback(panel));
    notebooks.widgetAdded.connect((_, panel) => new SavedOutputFallback(panel));
  }
};

export default [plugin, languages, templates, savedOutput];
